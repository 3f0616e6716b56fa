#include "model/hparams.h"

#include <fmt/format.h>

namespace strata::model {
namespace {

// Architectures this build can run, with their rotary style.
struct ArchRope {
  std::string_view arch;
  RopeType rope;
};
constexpr ArchRope kRopeTypes[] = {
    {"llama", RopeType::Norm},     {"qwen2", RopeType::Neox},    {"qwen3", RopeType::Neox},
    {"qwen3moe", RopeType::Neox},  {"qwen3next", RopeType::Neox}, {"qwen35", RopeType::IMrope},
    {"qwen35moe", RopeType::IMrope},
};

Result<int32_t> get_positive(const gguf::File& f, const std::string& key, int64_t fallback, bool required) {
  if (required && !f.has(key)) return make_error("{}: missing required key '{}'", f.path(), key);
  STRATA_ASSIGN(int64_t v, f.get_int_or(key, fallback));
  if (v < 0 || v > (1 << 30)) return make_error("{}: key '{}' = {} is out of range", f.path(), key, v);
  return static_cast<int32_t>(v);
}

// Keys that may be a scalar or a per-layer array; all layers must agree (per-layer shapes are not
// supported yet, and saying so beats computing garbage).
Result<int32_t> get_uniform(const gguf::File& f, const std::string& key, int64_t fallback, bool required) {
  const gguf::KeyValue* kv = f.find(key);
  if (kv && kv->type == gguf::ValueType::ARRAY) {
    STRATA_ASSIGN(std::vector<int64_t> values, f.get_int_array(key));
    if (values.empty()) return make_error("{}: key '{}' is an empty array", f.path(), key);
    for (int64_t v : values) {
      if (v != values[0]) return make_error("{}: key '{}' differs between layers; per-layer values are not supported", f.path(), key);
    }
    if (values[0] < 0 || values[0] > (1 << 30)) return make_error("{}: key '{}' out of range", f.path(), key);
    return static_cast<int32_t>(values[0]);
  }
  return get_positive(f, key, fallback, required);
}

}  // namespace

Result<HParams> load_hparams(const gguf::File& f, const gguf::TensorInfo* embd) {
  HParams hp;
  STRATA_ASSIGN(std::string_view arch, f.get_string("general.architecture"));
  hp.arch = std::string(arch);
  const ArchRope* known = nullptr;
  for (const auto& a : kRopeTypes) {
    if (a.arch == arch) known = &a;
  }
  if (!known) return make_error("{}: architecture '{}' is not supported", f.path(), arch);
  hp.rope_type = known->rope;
  STRATA_ASSIGN(std::string_view name, f.get_string_or("general.name", arch));
  hp.name = std::string(name);

  const std::string p = hp.arch + ".";
  STRATA_ASSIGN(hp.n_layer, get_positive(f, p + "block_count", 0, true));
  STRATA_ASSIGN(hp.n_embd, get_positive(f, p + "embedding_length", 0, true));
  STRATA_ASSIGN(hp.n_ctx_train, get_positive(f, p + "context_length", 0, true));
  if (hp.n_layer < 1 || hp.n_layer > 512) return make_error("{}: block_count {} out of range 1..512", f.path(), hp.n_layer);
  if (hp.n_embd < 1) return make_error("{}: embedding_length must be positive", f.path());
  STRATA_ASSIGN(hp.n_ff, get_uniform(f, p + "feed_forward_length", 0, false));
  STRATA_ASSIGN(hp.n_head, get_uniform(f, p + "attention.head_count", 0, true));
  if (hp.n_head < 1) return make_error("{}: attention.head_count must be positive", f.path());
  STRATA_ASSIGN(hp.n_head_kv, get_uniform(f, p + "attention.head_count_kv", hp.n_head, false));
  if (hp.n_head_kv < 1 || hp.n_head % hp.n_head_kv != 0) {
    return make_error("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), hp.n_head, hp.n_head_kv);
  }
  STRATA_ASSIGN(hp.head_dim_k, get_positive(f, p + "attention.key_length", hp.n_embd / hp.n_head, false));
  STRATA_ASSIGN(hp.head_dim_v, get_positive(f, p + "attention.value_length", hp.n_embd / hp.n_head, false));
  if (hp.head_dim_k < 1 || hp.head_dim_v < 1) return make_error("{}: head dimension must be positive", f.path());
  if (!f.has(p + "attention.layer_norm_rms_epsilon")) {
    return make_error("{}: missing required key '{}attention.layer_norm_rms_epsilon'", f.path(), p);
  }
  STRATA_ASSIGN(hp.rms_eps, f.get_f32(p + "attention.layer_norm_rms_epsilon"));

  STRATA_ASSIGN(hp.n_rot, get_positive(f, p + "rope.dimension_count", hp.head_dim_k, false));
  if (hp.n_rot > hp.head_dim_k || hp.n_rot % 2 != 0) {
    return make_error("{}: rope.dimension_count {} must be even and <= head dim {}", f.path(), hp.n_rot, hp.head_dim_k);
  }
  STRATA_ASSIGN(hp.rope_base, f.get_f32_or(p + "rope.freq_base", 10000.0f));
  STRATA_ASSIGN(std::string_view scaling, f.get_string_or(p + "rope.scaling.type", "linear"));
  if (scaling != "linear" && scaling != "none") {
    return make_error("{}: rope.scaling.type '{}' is not supported (linear or none)", f.path(), scaling);
  }
  float factor = 0.0f;
  if (f.has(p + "rope.scaling.factor")) {
    STRATA_ASSIGN(factor, f.get_f32(p + "rope.scaling.factor"));
  } else if (f.has(p + "rope.scale_linear")) {
    STRATA_ASSIGN(factor, f.get_f32(p + "rope.scale_linear"));
  }
  hp.rope_freq_scale = (factor == 0.0f || scaling == "none") ? 1.0f : 1.0f / factor;
  if (!(hp.rope_base > 0.0f) || !(hp.rope_freq_scale > 0.0f)) {
    return make_error("{}: rope.freq_base and rope scaling must be positive", f.path());
  }
  if (hp.rope_type == RopeType::IMrope) {
    STRATA_ASSIGN(std::vector<int64_t> sections, f.get_int_array(p + "rope.dimension_sections"));
    if (sections.size() != 4) return make_error("{}: rope.dimension_sections must have 4 values", f.path());
    for (int i = 0; i < 4; ++i) hp.rope_sections[i] = static_cast<int32_t>(sections[i]);
  }

  STRATA_ASSIGN(hp.n_expert, get_positive(f, p + "expert_count", 0, false));
  STRATA_ASSIGN(hp.n_expert_used, get_positive(f, p + "expert_used_count", 0, false));
  if (hp.n_expert_used > hp.n_expert) return make_error("{}: expert_used_count exceeds expert_count", f.path());
  STRATA_ASSIGN(hp.n_ff_expert, get_positive(f, p + "expert_feed_forward_length",
                                             hp.n_expert_used ? hp.n_ff / hp.n_expert_used : 0, false));
  STRATA_ASSIGN(hp.n_ff_shared_expert, get_positive(f, p + "expert_shared_feed_forward_length", hp.n_ff, false));

  if (!embd) return make_error("{}: missing tensor 'token_embd.weight'", f.path());
  if (embd->ne[0] != hp.n_embd) {
    return make_error("{}: token_embd.weight has width {}, expected embedding_length {}", f.path(), embd->ne[0], hp.n_embd);
  }
  if (embd->ne[1] < 1 || embd->ne[1] > (1 << 30)) return make_error("{}: token_embd.weight has a bad vocab size", f.path());
  hp.n_vocab = static_cast<int32_t>(embd->ne[1]);
  return hp;
}

}  // namespace strata::model
