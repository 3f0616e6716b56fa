#include "cli/llama_flags.h"

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "memory/kv_cache.h"
#include "plan/plan.h"

namespace strata::cli {
namespace {

constexpr const char* kGroup = "llama.cpp compatibility";

spdlog::level::level_enum level_for_verbosity(int32_t v) {
  switch (v) {
    case 0:
      return spdlog::level::critical;  // llama's "generic output" only: our output is not logged
    case 1:
      return spdlog::level::err;
    case 2:
      return spdlog::level::warn;
    case 3:
      return spdlog::level::info;
    case 4:
      return spdlog::level::debug;
    default:
      return spdlog::level::trace;
  }
}

// A notice that does not depend on the value.
std::function<std::string()> always(std::string why) {
  return [why = std::move(why)] { return why; };
}

// llama.cpp's -ctk / -ctv: the types this cache implements; any other value (llama.cpp's f32, bf16,
// q4_1, iq4_nl, q5_0, q5_1 included) is refused with the list.
void add_cache_type(CLI::App& cmd, const char* names, const char* what, std::string& value) {
  cmd.add_option(names, value, fmt::format("{} cache type: f16, q8_0 or q4_0", what))
      ->capture_default_str()
      ->group(kGroup)
      ->check([](const std::string& v) {
        auto t = memory::parse_kv_type(v);
        return t.ok() ? std::string() : t.error().message;
      });
}

void add_log_flags(CLI::App& cmd, LlamaFlags& f) {
  cmd.add_option("--verbosity,--log-verbosity", f.verbosity,
                 "(-lv) log threshold, llama's scale: 0 output only, 1 errors, 2 warnings, 3 info, 4 debug, 5 trace")
      ->group(kGroup)
      ->check(CLI::Range(0, 1000));
  cmd.add_option("--log-file", f.log_file, "also write the log to this file")->group(kGroup);
  cmd.add_flag("--log-disable", f.log_disable, "no log at all")->group(kGroup);
  cmd.add_option("--log-colors", f.log_colors, "colored log: on, off or auto (a bare flag: on)")
      ->expected(0, 1)
      ->default_str("on")
      ->group(kGroup)
      ->check(CLI::IsMember({"on", "off", "auto"}));
}

void add_device_flags(CLI::App& cmd, LlamaFlags& f) {
  const std::string cpu = "every node computes on its CPU: there are no GPUs or devices to choose";
  f.notices.emplace_back(cmd.add_option("--main-gpu", f.main_gpu, "(-mg) ignored: no GPUs")->group(kGroup),
                         always(cpu));
  f.notices.emplace_back(
      cmd.add_option("--device", f.device, "(-dev) ignored: no devices; nodes come from --rpc")->group(kGroup),
      always(cpu + "; the nodes are this machine and the --rpc workers"));
  f.notices.emplace_back(
      cmd.add_flag("--cpu-moe", f.cpu_moe, "(-cmoe) ignored: experts are always in host memory")->group(kGroup),
      always("every node is a CPU: MoE experts already live in host memory"));
  f.notices.emplace_back(
      cmd.add_option("--n-cpu-moe", f.n_cpu_moe, "(-ncmoe) ignored: experts are always in host memory")
          ->group(kGroup)
          ->check(CLI::Range(0, 1 << 20)),
      always("every node is a CPU: MoE experts already live in host memory"));
  f.notices.emplace_back(cmd.add_option("--numa", f.numa, "ignored: NUMA placement is not implemented")
                             ->group(kGroup)
                             ->check(CLI::IsMember({"distribute", "isolate", "numactl"})),
                         always("NUMA placement is not implemented; threads are not pinned to nodes"));
  f.notices.emplace_back(cmd.add_option("--prio", f.prio, "ignored: thread priority is not changed")
                             ->group(kGroup)
                             ->check(CLI::Range(-1, 3)),
                         always("thread priority is not changed"));
  f.notices.emplace_back(cmd.add_option("--poll", f.poll, "ignored: threads wait without a polling level")
                             ->group(kGroup)
                             ->check(CLI::Range(0, 100)),
                         always("threads meet at a barrier; there is no polling level to set"));
  const std::string no_gpu = "there is no GPU to hold the KV cache: each node keeps its layers' cache in its memory";
  f.notices.emplace_back(cmd.add_flag("--kv-offload", f.kv_offload, "(-kvo) ignored: no GPUs")->group(kGroup),
                         always(no_gpu));
  f.notices.emplace_back(cmd.add_flag("--no-kv-offload", f.no_kv_offload, "(-nkvo) ignored: no GPUs")->group(kGroup),
                         always(no_gpu));
  // Checked in apply_llama_flags: none and row are errors that say what to use, not notices.
  cmd.add_option("--split-mode", f.split_mode,
                 "(-sm) layer: whole layers per node (a pipeline); tensor: every layer sliced over the nodes, which "
                 "then work on each token together")
      ->capture_default_str()
      ->group(kGroup)
      ->check(CLI::IsMember({"none", "layer", "row", "tensor"}));
}

}  // namespace

void add_llama_flags(CLI::App& cmd, LlamaFlags& f) {
  add_log_flags(cmd, f);
  cmd.add_option("--ubatch-size", f.n_ubatch, "(-ub) physical batch: caps -b, the largest batch of one decode call")
      ->group(kGroup)
      ->check(CLI::Range(1, 1 << 16));
  f.notices.emplace_back(
      cmd.add_option("--flash-attn", f.flash_attn, "(-fa) on|off|auto (llama-bench's 1|0 too); ignored: always fused")
          ->expected(0, 1)
          ->default_str("on")
          ->group(kGroup)
          ->check(CLI::IsMember({"on", "off", "auto", "1", "0"})),
      always("attention is always computed fused (one pass over the cache); there is nothing to switch"));
  f.notices.emplace_back(cmd.add_option("--fit", f.fit, "(-fit) on|off; ignored: the planner places every tensor")
                             ->group(kGroup)
                             ->check(CLI::IsMember({"on", "off"})),
                         always("the planner places every tensor from the nodes' memory; there is nothing to fit"));
  add_cache_type(cmd, "--cache-type-k", "(-ctk) K", f.cache_type_k);
  add_cache_type(cmd, "--cache-type-v", "(-ctv) V", f.cache_type_v);
  f.notices.emplace_back(
      cmd.add_flag("--mlock", f.mlock, "ignored: weights are memory-mapped, not locked")->group(kGroup),
      always("not implemented: the weights stay memory-mapped and may be paged out"));
  f.notices.emplace_back(
      cmd.add_flag("--no-mmap", f.no_mmap, "ignored: weights are always memory-mapped")->group(kGroup),
      always("the weights are always memory-mapped"));
  cmd.add_flag("--mmap", f.mmap, "weights are memory-mapped (always)")->group(kGroup);
  f.notices.emplace_back(cmd.add_option("--threads-batch", f.threads_batch, "(-tb) ignored: -t serves prompts too")
                             ->group(kGroup)
                             ->check(CLI::Range(-1, 1024)),
                         always("one thread count (-t) serves prompt processing and generation"));
  f.notices.emplace_back(cmd.add_flag("--offline", f.offline, "nothing is downloaded (always)")->group(kGroup),
                         always("nothing is ever downloaded: -m is a local file"));
  add_device_flags(cmd, f);
}

Status apply_llama_flags(const LlamaFlags& f) {
  STRATA_TRY(plan::parse_split_mode(f.split_mode));
  auto logger = spdlog::default_logger();
  if (f.log_disable) {
    logger->set_level(spdlog::level::off);
    return {};
  }
  if (f.verbosity >= 0) logger->set_level(level_for_verbosity(f.verbosity));
  if (!f.log_colors.empty()) {
    const auto mode = f.log_colors == "on"    ? spdlog::color_mode::always
                      : f.log_colors == "off" ? spdlog::color_mode::never
                                              : spdlog::color_mode::automatic;
    for (auto& sink : logger->sinks()) {
      if (auto* s = dynamic_cast<spdlog::sinks::stderr_color_sink_mt*>(sink.get())) s->set_color_mode(mode);
    }
  }
  if (!f.log_file.empty()) {
    try {
      auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(f.log_file, true);
      sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
      logger->sinks().push_back(std::move(sink));
    } catch (const spdlog::spdlog_ex& e) {
      return make_error("--log-file {}: cannot open it: {}", f.log_file, e.what());
    }
  }
  return {};
}

void print_notices(const std::vector<std::pair<CLI::Option*, std::function<std::string()>>>& notices) {
  for (const auto& [option, why] : notices) {
    if (option->count() == 0) continue;
    const std::string text = why();
    if (text.empty()) continue;
    std::string name = option->get_name();
    for (const auto& [alias, target] : llama_short_aliases()) {
      if (target == name) name = alias + "/" + name;
    }
    spdlog::info("{} has no effect here: {}", name, text);
  }
}

void print_environment_notices() {
  if (std::getenv("GGML_RPC_DEBUG")) {
    spdlog::info("GGML_RPC_DEBUG is set but not used: Strata's links are gRPC, not ggml-rpc; -lv 4 logs them");
  }
}

const std::vector<std::pair<std::string, std::string>>& llama_short_aliases() {
  static const std::vector<std::pair<std::string, std::string>> kAliases = {
      {"-ts", "--tensor-split"},    {"-ngl", "--n-gpu-layers"},
      {"-ot", "--override-tensor"}, {"-np", "--parallel"},
      {"-lv", "--verbosity"},       {"-fit", "--fit"},
      {"-fa", "--flash-attn"},      {"-ctk", "--cache-type-k"},
      {"-ctv", "--cache-type-v"},   {"-ub", "--ubatch-size"},
      {"-cram", "--cache-ram"},     {"-ctxcp", "--ctx-checkpoints"},
      {"-sps", "--slot-prompt-similarity"},
      {"-cb", "--cont-batching"},   {"-nocb", "--no-cont-batching"},
      {"-sm", "--split-mode"},      {"-mg", "--main-gpu"},
      {"-dev", "--device"},         {"-cmoe", "--cpu-moe"},
      {"-ncmoe", "--n-cpu-moe"},    {"-tb", "--threads-batch"},
      {"-kvo", "--kv-offload"},     {"-nkvo", "--no-kv-offload"},
      {"-kvu", "--kv-unified"},     {"-no-kvu", "--no-kv-unified"},
  };
  return kAliases;
}

}  // namespace strata::cli
