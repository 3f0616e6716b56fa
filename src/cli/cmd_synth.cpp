// strata synth: write a deterministic random-weight model.
#include <fmt/core.h>

#include <cctype>

#include "cli/common.h"
#include "tools/synth.h"

namespace strata::cli {
namespace {

struct SynthFlags {
  tools::SynthSpec spec;
  std::string type = "f32";
  std::string out;
  std::string preset;
  // Options the user gave override the preset's values: (option, copy of its field).
  std::vector<std::pair<CLI::Option*, std::function<void(tools::SynthSpec&, const tools::SynthSpec&)>>> fields;

  // Registers an option's field, so that giving the option overrides the preset's value.
  template <typename T>
  void field(CLI::Option* option, T tools::SynthSpec::*member) {
    fields.emplace_back(option, [member](tools::SynthSpec& d, const tools::SynthSpec& s) { d.*member = s.*member; });
  }
  // An option that sets a field of the spec (its default shown in --help).
  template <typename T>
  void spec_option(CLI::App& cmd, const std::string& name, T tools::SynthSpec::*member, const std::string& help) {
    field(cmd.add_option(name, spec.*member, help)->capture_default_str(), member);
  }
};

// The model's shape, in --help order.
void add_shape_options(CLI::App& cmd, SynthFlags& f) {
  using S = tools::SynthSpec;
  f.spec_option(cmd, "--arch", &S::arch, "architecture (llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe, qwen3next)");
  f.spec_option(cmd, "--layers", &S::n_layer, "layers");
  f.spec_option(cmd, "--embd", &S::n_embd, "embedding width");
  f.spec_option(cmd, "--heads", &S::n_head, "attention heads");
  f.spec_option(cmd, "--kv-heads", &S::n_head_kv, "key/value heads");
  f.spec_option(cmd, "--head-dim", &S::head_dim, "head dimension (0: embd / heads)");
  f.spec_option(cmd, "--ff", &S::n_ff, "feed-forward width");
  f.spec_option(cmd, "--rope-dim", &S::n_rot,
                "rotary dims (0: head dim; a quarter of it for qwen35/qwen35moe/qwen3next)");
  f.spec_option(cmd, "--experts", &S::n_expert, "routed experts (MoE architectures)");
  f.spec_option(cmd, "--experts-used", &S::n_expert_used, "experts per token (MoE architectures)");
  f.spec_option(cmd, "--expert-ff", &S::n_ff_expert, "expert feed-forward width (MoE architectures)");
  f.spec_option(cmd, "--shared-ff", &S::n_ff_shared_expert, "shared-expert feed-forward width (0: --expert-ff)");
  f.spec_option(cmd, "--ssm-conv", &S::ssm_conv_kernel, "Gated DeltaNet conv kernel (hybrid architectures)");
  f.spec_option(cmd, "--ssm-state", &S::ssm_state, "Gated DeltaNet head dim, k and v (hybrid architectures)");
  f.spec_option(cmd, "--ssm-k-heads", &S::ssm_k_heads, "Gated DeltaNet key heads (ssm.group_count)");
  f.spec_option(cmd, "--ssm-v-heads", &S::ssm_v_heads, "Gated DeltaNet value heads (ssm.time_step_rank)");
  f.spec_option(cmd, "--full-attn-interval", &S::full_attention_interval,
                "every n-th layer is full attention, the others Gated DeltaNet (hybrid architectures)");
  f.spec_option(cmd, "--ctx", &S::n_ctx, "training context written to the file");
  f.spec_option(cmd, "--seed", &S::seed, "random seed");
}

int run_synth(SynthFlags& f) {
  std::string type = f.type;
  for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto dtype = dtype_from_name(type);
  if (!dtype) return fail(make_error(ErrorCode::kInvalidArgument, "synth: unknown --type '{}'", f.type));
  f.spec.type = *dtype;
  if (!f.preset.empty()) {
    auto preset = tools::synth_preset(f.preset);
    if (!preset.ok()) return fail(preset.error());
    for (const auto& [option, copy] : f.fields) {
      if (option->count() > 0) copy(*preset, f.spec);
    }
    preset->type = f.spec.type;
    f.spec = *preset;
  }
  auto status = tools::write_synth_model(f.spec, f.out, [](size_t i, size_t n) {
    if (i == n || i % 16 == 0) fmt::print(stderr, "\rsynth: tensor {}/{}", i, n);
  });
  fmt::print(stderr, "\n");
  if (!status.ok()) return fail(status.error());
  fmt::print(stderr, "synth: wrote {}\n", f.out);
  return 0;
}

}  // namespace

Command add_synth(CLI::App& app) {
  auto f = std::make_shared<SynthFlags>();
  CLI::App* cmd = app.add_subcommand("synth", "write a deterministic random-weight model with a built-in vocabulary");
  add_shape_options(*cmd, *f);
  cmd->add_option("--type", f->type, "matrix type: f32 or f16")->capture_default_str();
  cmd->add_option("-o,--output", f->out, "output GGUF file")->required();
  cmd->add_option("--preset", f->preset, "a real model's shape: llama-1b, qwen35moe-a3b (other flags override it)");
  using S = tools::SynthSpec;
  f->field(cmd->add_option("--vocab", f->spec.n_vocab, "vocabulary size (padded with unused tokens)"), &S::n_vocab);
  f->field(cmd->add_flag("--tied-output", f->spec.tied_output, "no output.weight: reuse token_embd"), &S::tied_output);
  f->field(cmd->add_flag("--mtp", f->spec.n_nextn,
                         "append a multi-token-prediction block (nextn_predict_layers 1; qwen35 family), "
                         "as llama.cpp loads it for --spec-type draft-mtp"),
           &S::n_nextn);
  return [f]() -> int { return run_synth(*f); };
}

}  // namespace strata::cli
