#include "cli/common.h"

#include <fmt/core.h>

#include "memory/kv_cache.h"
#include "net/grpc_executor.h"
#include "net/model_identity.h"

namespace strata::cli {

void add_model_flags(CLI::App& cmd, ModelFlags& f, bool with_context) {
  cmd.add_option("-m,--model", f.model, "GGUF model file")->required()->check(CLI::ExistingFile);
  if (with_context) {
    cmd.add_option("-c,--ctx-size", f.n_ctx, "context size in tokens (0: min(4096, training context))")
        ->check(CLI::Range(0, 1 << 24));
    cmd.add_option("-b,--batch-size", f.n_batch, "largest batch of prompt tokens per decode call")
        ->capture_default_str()->check(CLI::Range(1, 1 << 16));
  }
  cmd.add_option("-t,--threads", f.n_threads, "threads (0: all cores)")->check(CLI::Range(0, 1024));
  add_cluster_flags(cmd, f.cluster);
  add_llama_flags(cmd, f.llama);
}

void add_cluster_flags(CLI::App& cmd, ClusterFlags& f) {
  const char* group = "Cluster";
  cmd.add_option("--rpc", f.rpc, "workers, comma separated: host:port,host:port")->group(group);
  cmd.add_option("--tensor-split", f.tensor_split,
                 "(-ts) layer ratios over the workers in --rpc order, e.g. 3,2; one extra leading value puts "
                 "this machine first; auto (the default without -ts, -ngl and -ot): split by the nodes' measured "
                 "speeds within memory, for the least predicted time per token (strata plan shows it)")->group(group);
  cmd.add_option("--expert-split", f.expert_split,
                 "-sm tensor: how routed experts are cut: rows (rows of every expert on every node) or whole (each "
                 "node holds whole experts and runs only a token's experts it holds)")
      ->capture_default_str()->group(group)->check(CLI::IsMember({"rows", "whole"}));
  // llama.cpp's -ngl also takes auto (the default split) and all.
  cmd.add_option("--n-gpu-layers,--gpu-layers", f.n_gpu_layers, "(-ngl) layers on the workers (the last N, output "
                 "included; auto: the default split, all: every layer); the rest stay here")
      ->group(group)->transform(CLI::Transformer({{"auto", "-1"}, {"all", "1048576"}}))->check(CLI::Range(-1, 1 << 20));
  cmd.add_option("--override-tensor", f.overrides,
                 "(-ot) pin tensors: REGEX=NODE[,REGEX=NODE...]; NODE is local/CPU, host:port or RPC<n>[host:port]; "
                 "a layer whose tensors are all pinned to one node is owned by that node")->group(group);
  cmd.add_flag("--strict-placement", f.strict_placement, "fail (exit 2) when -ot overrides -ts/-ngl")->group(group);
  cmd.add_option("--local-workers", f.local_workers, "start N workers on loopback for this run")
      ->group(group)->check(CLI::Range(0, 16));
  cmd.add_option("--local-worker-cpus", f.local_worker_cpus,
                 "CPU time each local worker may use, in cores (0: unheld), e.g. 0,0.5 (a cgroup each): an "
                 "uneven cluster on one machine")->group(group);
  cmd.add_option("--worker-threads", f.worker_threads, "threads per worker (0: the worker's own)")
      ->group(group)->check(CLI::Range(0, 1024));
  cmd.add_option("--token", f.token, "shared token for the workers")->group(group);
  cmd.add_option("--token-file", f.token_file, "read the token from a file")->group(group);
  cmd.add_option("--tls-ca", f.tls_ca, "CA certificate (PEM) that signs the workers' certificates")->group(group);
  cmd.add_option("--tls-cert", f.tls_cert, "client certificate for mutual TLS")->group(group);
  cmd.add_option("--tls-key", f.tls_key, "client key for mutual TLS")->group(group);
  cmd.add_option("--rpc-timeout", f.timeout_ms, "deadline of each call to a worker, ms")
      ->capture_default_str()->group(group)->check(CLI::Range(100, 3600000));
  cmd.add_option("--failover", f.failover,
                 "when a worker fails under requests: wait (for it to come back), replan (wait a few seconds, then "
                 "plan over the nodes that answer if they have room) or off (the requests fail at once)")
      ->capture_default_str()->group(group)->check(CLI::IsMember({"off", "wait", "replan"}));
  cmd.add_option("--recover-timeout", f.recover_timeout_s,
                 "seconds requests in flight wait for the cluster to recover before they fail")
      ->capture_default_str()->group(group)->check(CLI::Range(1, 86400));
}

Result<runtime::EngineOptions> engine_options(const ModelFlags& f, runtime::LocalWorkers& workers) {
  STRATA_TRY(apply_llama_flags(f.llama));
  print_environment_notices();
  print_notices(f.llama.notices);
  runtime::EngineOptions o;
  o.model_path = f.model;
  o.n_ctx = f.n_ctx;
  o.n_threads = f.n_threads;
  o.n_batch = f.llama.n_ubatch > 0 ? std::min(f.n_batch, f.llama.n_ubatch) : f.n_batch;
  o.n_seq = f.n_seq;
  STRATA_ASSIGN(o.type_k, memory::parse_kv_type(f.llama.cache_type_k));
  STRATA_ASSIGN(o.type_v, memory::parse_kv_type(f.llama.cache_type_v));
  const ClusterFlags& c = f.cluster;
  runtime::ClusterOptions& cluster = o.cluster;
  if (!c.rpc.empty()) {
    STRATA_ASSIGN(cluster.workers, plan::parse_rpc_list(c.rpc));
  }
  if (c.tensor_split == "auto") {
    cluster.tensor_split_auto = true;
  } else if (!c.tensor_split.empty()) {
    STRATA_ASSIGN(cluster.tensor_split, plan::parse_tensor_split(c.tensor_split));
  }
  cluster.n_gpu_layers = c.n_gpu_layers;
  STRATA_ASSIGN(cluster.expert_split, plan::parse_expert_split(c.expert_split));
  STRATA_ASSIGN(cluster.split_mode, plan::parse_split_mode(f.llama.split_mode));
  for (const std::string& text : c.overrides) {
    STRATA_ASSIGN(std::vector<plan::TensorOverride> rules, plan::parse_overrides(text));
    cluster.overrides.insert(cluster.overrides.end(), rules.begin(), rules.end());
  }
  cluster.strict_placement = c.strict_placement;
  cluster.timeout_ms = c.timeout_ms;
  cluster.failover = c.failover == "off" ? runtime::Failover::kOff
                     : c.failover == "wait" ? runtime::Failover::kWait
                                            : runtime::Failover::kReplan;
  cluster.recover_timeout_ms = c.recover_timeout_s * 1000;
  cluster.worker_threads = c.worker_threads;
  cluster.depth = c.depth;
  net::LinkSecurity security = {c.token, c.tls_ca, c.tls_cert, c.tls_key};
  if (!c.token_file.empty()) {
    STRATA_ASSIGN(security.token, net::read_token_file(c.token_file));
  }
  if (c.local_workers > 0) {
    const int32_t threads = c.worker_threads > 0 ? c.worker_threads : 1;
    std::vector<double> cpus;
    if (!c.local_worker_cpus.empty()) {
      auto parsed = plan::parse_tensor_split(c.local_worker_cpus);
      if (!parsed.ok()) return make_error("--local-worker-cpus: {}", parsed.error().message);
      cpus = *parsed;
    }
    STRATA_ASSIGN(workers, runtime::LocalWorkers::start(c.local_workers, threads, default_cache_dir(), cpus));
    for (const std::string& endpoint : workers.endpoints()) cluster.workers.push_back(endpoint);
    if (security.token.empty()) security.token = workers.token();
  }
  cluster.transport = net::grpc_transport(security, cluster.timeout_ms);
  return o;
}

Result<std::unique_ptr<runtime::Engine>> load_engine(const ModelFlags& f, runtime::LocalWorkers& workers,
                                                     int32_t n_checkpoints, bool mtp) {
  STRATA_ASSIGN(runtime::EngineOptions options, engine_options(f, workers));
  options.n_checkpoints = n_checkpoints;
  options.mtp = mtp;
  auto engine = runtime::Engine::load(options);
  if (!engine.ok() && engine.error().code == ErrorCode::kPlacementRefused) {
    Error e = std::move(engine).error();
    e.message = "placement refused: " + e.message;
    return e;
  }
  return engine;
}

void add_depth_flag(CLI::App& cmd, ClusterFlags& f, const std::string& names) {
  cmd.add_option(names, f.depth,
                 "tokens already in a sequence's context: the depth -ts auto balances and the prediction is for "
                 "(attention grows with it; a coding agent's requests run tens of thousands deep)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
}

void add_sampling_flags(CLI::App& cmd, sampling::Params& p) {
  cmd.add_option("--temp", p.temp, "temperature; <= 0 is greedy")->capture_default_str();
  cmd.add_option("--top-k", p.top_k, "keep the k most likely tokens (<= 0: all)")->capture_default_str();
  cmd.add_option("--top-p", p.top_p, "nucleus sampling threshold")->capture_default_str();
  cmd.add_option("--min-p", p.min_p, "drop tokens below min-p x the top probability")->capture_default_str();
  cmd.add_option("-s,--seed", p.seed, "random seed (0xFFFFFFFF: random)")->capture_default_str();
  cmd.add_option("--repeat-penalty", p.repeat_penalty, "penalty for repeated tokens")->capture_default_str();
  cmd.add_option("--repeat-last-n", p.penalty_last_n, "tokens considered for penalties (-1: all)")->capture_default_str();
  cmd.add_option("--frequency-penalty", p.frequency_penalty, "frequency penalty")->capture_default_str();
  cmd.add_option("--presence-penalty", p.presence_penalty, "presence penalty")->capture_default_str();
}

void add_spec_flags(CLI::App& cmd, SpecFlags& f) {
  runtime::SpecParams& p = f.params;
  cmd.add_option("--spec-type", f.type, "speculative decoding: none, ngram-simple (prompt lookup) or draft-mtp (the model's MTP block)")->capture_default_str();
  cmd.add_option("--spec-draft-n-max", p.n_max, "most tokens to draft")->capture_default_str();
  cmd.add_option("--spec-draft-n-min", p.n_min, "fewest drafted tokens worth checking")->capture_default_str();
  cmd.add_option("--spec-draft-p-min,--draft-p-min", p.p_min, "a draft model stops below this probability")
      ->capture_default_str();
  cmd.add_option("--spec-ngram-simple-size-n", p.ngram_n, "ngram-simple: the n-gram looked up")->capture_default_str();
  cmd.add_option("--spec-ngram-simple-size-m", p.ngram_m, "ngram-simple: most tokens drafted")->capture_default_str();
  cmd.add_option("--spec-ngram-simple-min-hits", p.ngram_min_hits, "ngram-simple: earlier matches needed")
      ->capture_default_str();
}

Result<runtime::SpecParams> spec_params(const SpecFlags& f) {
  runtime::SpecParams p = f.params;
  STRATA_ASSIGN(p.type, runtime::parse_spec_type(f.type));
  STRATA_TRY(runtime::validate(p));
  return p;
}

int fail(const Error& e) {
  fmt::print(stderr, "error: {}\n", e.message);
  return e.code == ErrorCode::kPlacementRefused ? 2 : 1;
}

}  // namespace strata::cli
