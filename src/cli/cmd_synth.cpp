// strata synth: write a deterministic random-weight model.
#include <fmt/core.h>

#include <cctype>

#include "cli/common.h"
#include "tools/synth.h"

namespace strata::cli {

Command add_synth(CLI::App& app) {
  struct Flags {
    tools::SynthSpec spec;
    std::string type = "f32";
    std::string out;
    std::string preset;
    // Options the user gave override the preset's values: (option, copy of its field).
    std::vector<std::pair<CLI::Option*, std::function<void(tools::SynthSpec&, const tools::SynthSpec&)>>> fields;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("synth", "write a deterministic random-weight model with a built-in vocabulary");
  f->fields.emplace_back(cmd->add_option("--arch", f->spec.arch, "architecture (llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe, qwen3next)")
      ->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.arch = s.arch; });
  f->fields.emplace_back(cmd->add_option("--layers", f->spec.n_layer, "layers")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_layer = s.n_layer; });
  f->fields.emplace_back(cmd->add_option("--embd", f->spec.n_embd, "embedding width")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_embd = s.n_embd; });
  f->fields.emplace_back(cmd->add_option("--heads", f->spec.n_head, "attention heads")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_head = s.n_head; });
  f->fields.emplace_back(cmd->add_option("--kv-heads", f->spec.n_head_kv, "key/value heads")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_head_kv = s.n_head_kv; });
  f->fields.emplace_back(cmd->add_option("--head-dim", f->spec.head_dim, "head dimension (0: embd / heads)")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.head_dim = s.head_dim; });
  f->fields.emplace_back(cmd->add_option("--ff", f->spec.n_ff, "feed-forward width")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_ff = s.n_ff; });
  f->fields.emplace_back(cmd->add_option("--rope-dim", f->spec.n_rot, "rotary dims (0: head dim; a quarter of it for qwen35/qwen35moe/qwen3next)")
      ->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_rot = s.n_rot; });
  f->fields.emplace_back(cmd->add_option("--experts", f->spec.n_expert, "routed experts (MoE architectures)")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_expert = s.n_expert; });
  f->fields.emplace_back(cmd->add_option("--experts-used", f->spec.n_expert_used, "experts per token (MoE architectures)")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_expert_used = s.n_expert_used; });
  f->fields.emplace_back(cmd->add_option("--expert-ff", f->spec.n_ff_expert, "expert feed-forward width (MoE architectures)")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_ff_expert = s.n_ff_expert; });
  f->fields.emplace_back(cmd->add_option("--shared-ff", f->spec.n_ff_shared_expert, "shared-expert feed-forward width (0: --expert-ff)")
      ->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_ff_shared_expert = s.n_ff_shared_expert; });
  f->fields.emplace_back(cmd->add_option("--ssm-conv", f->spec.ssm_conv_kernel, "Gated DeltaNet conv kernel (hybrid architectures)")
      ->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.ssm_conv_kernel = s.ssm_conv_kernel; });
  f->fields.emplace_back(cmd->add_option("--ssm-state", f->spec.ssm_state, "Gated DeltaNet head dim, k and v (hybrid architectures)")
      ->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.ssm_state = s.ssm_state; });
  f->fields.emplace_back(cmd->add_option("--ssm-k-heads", f->spec.ssm_k_heads, "Gated DeltaNet key heads (ssm.group_count)")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.ssm_k_heads = s.ssm_k_heads; });
  f->fields.emplace_back(cmd->add_option("--ssm-v-heads", f->spec.ssm_v_heads, "Gated DeltaNet value heads (ssm.time_step_rank)")
      ->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.ssm_v_heads = s.ssm_v_heads; });
  f->fields.emplace_back(cmd->add_option("--full-attn-interval", f->spec.full_attention_interval,
                  "every n-th layer is full attention, the others Gated DeltaNet (hybrid architectures)")
      ->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.full_attention_interval = s.full_attention_interval; });
  f->fields.emplace_back(cmd->add_option("--ctx", f->spec.n_ctx, "training context written to the file")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_ctx = s.n_ctx; });
  f->fields.emplace_back(cmd->add_option("--seed", f->spec.seed, "random seed")->capture_default_str(),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.seed = s.seed; });
  cmd->add_option("--type", f->type, "matrix type: f32 or f16")->capture_default_str();
  cmd->add_option("-o,--output", f->out, "output GGUF file")->required();
  cmd->add_option("--preset", f->preset, "a real model's shape: llama-1b, qwen35moe-a3b (other flags override it)");
  f->fields.emplace_back(cmd->add_option("--vocab", f->spec.n_vocab, "vocabulary size (padded with unused tokens)"),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_vocab = s.n_vocab; });
  f->fields.emplace_back(cmd->add_flag("--tied-output", f->spec.tied_output, "no output.weight: reuse token_embd"),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.tied_output = s.tied_output; });
  f->fields.emplace_back(cmd->add_flag("--mtp", f->spec.n_nextn,
                                       "append a multi-token-prediction block (nextn_predict_layers 1; qwen35 family), "
                                       "as llama.cpp loads it for --spec-type draft-mtp"),
                         [](tools::SynthSpec& d, const tools::SynthSpec& s) { d.n_nextn = s.n_nextn; });
  return [f]() -> int {
    std::string type = f->type;
    for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    auto dtype = dtype_from_name(type);
    if (!dtype) return fail(make_error(ErrorCode::kInvalidArgument, "synth: unknown --type '{}'", f->type));
    f->spec.type = *dtype;
    if (!f->preset.empty()) {
      auto preset = tools::synth_preset(f->preset);
      if (!preset.ok()) return fail(preset.error());
      for (const auto& [option, copy] : f->fields) {
        if (option->count() > 0) copy(*preset, f->spec);
      }
      preset->type = f->spec.type;
      f->spec = *preset;
    }
    auto status = tools::write_synth_model(f->spec, f->out, [](size_t i, size_t n) {
      if (i == n || i % 16 == 0) fmt::print(stderr, "\rsynth: tensor {}/{}", i, n);
    });
    fmt::print(stderr, "\n");
    if (!status.ok()) return fail(status.error());
    fmt::print(stderr, "synth: wrote {}\n", f->out);
    return 0;
  };
}

}  // namespace strata::cli
