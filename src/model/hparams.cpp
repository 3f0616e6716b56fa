#include "model/hparams.h"

#include <fmt/format.h>

namespace strata::model {
namespace {

// Architectures this build can run: rotary style and which blocks their layers use.
constexpr ArchTraits kArchs[] = {
    {"llama", RopeType::Norm, false, false, false},        {"qwen2", RopeType::Neox, false, false, false},
    {"qwen3", RopeType::Neox, false, false, false},        {"qwen3moe", RopeType::Neox, true, false, false},
    {"qwen3next", RopeType::Neox, true, true, true},       {"qwen35", RopeType::IMrope, false, false, true},
    {"qwen35moe", RopeType::IMrope, true, true, true},
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

Status load_experts(const gguf::File& f, const std::string& p, const ArchTraits& arch, HParams& hp) {
  STRATA_ASSIGN(hp.n_expert, get_positive(f, p + "expert_count", 0, arch.moe));
  STRATA_ASSIGN(hp.n_expert_used, get_positive(f, p + "expert_used_count", 0, arch.moe));
  if (arch.moe && (hp.n_expert < 1 || hp.n_expert_used < 1)) {
    return make_error("{}: keys '{}expert_count' ({}) and '{}expert_used_count' ({}) must be positive", f.path(), p,
                      hp.n_expert, p, hp.n_expert_used);
  }
  if (hp.n_expert_used > hp.n_expert) {
    return make_error("{}: key '{}expert_used_count' ({}) exceeds '{}expert_count' ({})", f.path(), p, hp.n_expert_used,
                      p, hp.n_expert);
  }
  STRATA_ASSIGN(hp.n_ff_expert, get_positive(f, p + "expert_feed_forward_length",
                                             hp.n_expert_used ? hp.n_ff / hp.n_expert_used : 0, false));
  if (arch.moe && hp.n_ff_expert < 1) {
    return make_error("{}: key '{}expert_feed_forward_length' is missing or zero (and feed_forward_length gives no default)",
                      f.path(), p);
  }
  if (arch.shared_expert) {
    STRATA_ASSIGN(hp.n_ff_shared_expert, get_positive(f, p + "expert_shared_feed_forward_length", hp.n_ff, false));
    if (hp.n_ff_shared_expert < 1) {
      return make_error("{}: key '{}expert_shared_feed_forward_length' is missing or zero (and feed_forward_length gives "
                        "no default)", f.path(), p);
    }
  }
  return {};
}

// Which layers are recurrent: attention.recurrent_layers (a scalar, or one bool/int per block) when
// present, else every layer but each full_attention_interval-th. MTP blocks are never run.
Status load_layer_pattern(const gguf::File& f, const std::string& p, HParams& hp) {
  hp.recurrent.assign(hp.n_layer, 0);
  const std::string key = p + "attention.recurrent_layers";
  if (const gguf::KeyValue* kv = f.find(key)) {
    std::vector<int64_t> flags;
    if (kv->type == gguf::ValueType::ARRAY) {
      STRATA_ASSIGN(flags, f.get_int_array(key));
      if (static_cast<int64_t>(flags.size()) != hp.n_layer_all) {
        return make_error("{}: key '{}' has {} values, expected block_count = {}", f.path(), key, flags.size(),
                          hp.n_layer_all);
      }
    } else if (kv->type == gguf::ValueType::BOOL) {
      STRATA_ASSIGN(bool b, f.get_bool(key));
      flags.assign(hp.n_layer_all, b ? 1 : 0);
    } else {
      STRATA_ASSIGN(int64_t v, f.get_int(key));
      flags.assign(hp.n_layer_all, v);
    }
    for (int il = 0; il < hp.n_layer; ++il) hp.recurrent[il] = flags[il] != 0;
    return {};
  }
  STRATA_ASSIGN(hp.full_attention_interval, get_positive(f, p + "full_attention_interval", 4, false));
  if (hp.full_attention_interval < 1) {
    return make_error("{}: key '{}full_attention_interval' must be positive", f.path(), p);
  }
  for (int il = 0; il < hp.n_layer; ++il) hp.recurrent[il] = (il + 1) % hp.full_attention_interval != 0;
  return {};
}

Status load_gated_delta_net(const gguf::File& f, const std::string& p, HParams& hp) {
  STRATA_ASSIGN(hp.ssm_conv_kernel, get_positive(f, p + "ssm.conv_kernel", 0, true));
  STRATA_ASSIGN(hp.ssm_inner_size, get_positive(f, p + "ssm.inner_size", 0, true));
  STRATA_ASSIGN(hp.ssm_state_size, get_positive(f, p + "ssm.state_size", 0, true));
  STRATA_ASSIGN(hp.ssm_n_v_heads, get_positive(f, p + "ssm.time_step_rank", 0, true));
  STRATA_ASSIGN(hp.ssm_n_k_heads, get_positive(f, p + "ssm.group_count", 0, true));
  const struct {
    const char* key;
    int32_t value;
    int32_t max;
  } checks[] = {{"ssm.conv_kernel", hp.ssm_conv_kernel, 64},
                {"ssm.inner_size", hp.ssm_inner_size, 1 << 20},
                {"ssm.state_size", hp.ssm_state_size, 1024},
                {"ssm.time_step_rank", hp.ssm_n_v_heads, 4096},
                {"ssm.group_count", hp.ssm_n_k_heads, 4096}};
  for (const auto& c : checks) {
    if (c.value < 1 || c.value > c.max) {
      return make_error("{}: key '{}{}' = {} is out of range 1..{}", f.path(), p, c.key, c.value, c.max);
    }
  }
  if (hp.ssm_n_v_heads % hp.ssm_n_k_heads != 0) {
    return make_error("{}: key '{}ssm.time_step_rank' ({} value heads) must be a multiple of '{}ssm.group_count' ({})",
                      f.path(), p, hp.ssm_n_v_heads, p, hp.ssm_n_k_heads);
  }
  if (int64_t{hp.ssm_n_v_heads} * hp.ssm_state_size != hp.ssm_inner_size) {
    return make_error("{}: key '{}ssm.inner_size' ({}) must equal ssm.time_step_rank ({}) x ssm.state_size ({})",
                      f.path(), p, hp.ssm_inner_size, hp.ssm_n_v_heads, hp.ssm_state_size);
  }
  if (hp.head_dim_k != hp.head_dim_v) {
    return make_error("{}: keys '{}attention.key_length' ({}) and 'value_length' ({}) must be equal", f.path(), p,
                      hp.head_dim_k, hp.head_dim_v);
  }
  return load_layer_pattern(f, p, hp);
}

}  // namespace

const ArchTraits* find_arch_traits(std::string_view arch) {
  for (const ArchTraits& a : kArchs) {
    if (a.arch == arch) return &a;
  }
  return nullptr;
}

bool HParams::has_recurrent_layers() const {
  for (uint8_t r : recurrent) {
    if (r) return true;
  }
  return false;
}

Result<HParams> load_hparams(const gguf::File& f, const gguf::TensorInfo* embd) {
  HParams hp;
  STRATA_ASSIGN(std::string_view arch, f.get_string("general.architecture"));
  hp.arch = std::string(arch);
  const ArchTraits* known = find_arch_traits(arch);
  if (!known) return make_error("{}: architecture '{}' is not supported", f.path(), arch);
  hp.rope_type = known->rope;
  STRATA_ASSIGN(std::string_view name, f.get_string_or("general.name", arch));
  hp.name = std::string(name);

  const std::string p = hp.arch + ".";
  STRATA_ASSIGN(hp.n_layer_all, get_positive(f, p + "block_count", 0, true));
  STRATA_ASSIGN(hp.n_embd, get_positive(f, p + "embedding_length", 0, true));
  STRATA_ASSIGN(hp.n_ctx_train, get_positive(f, p + "context_length", 0, true));
  if (hp.n_layer_all < 1 || hp.n_layer_all > 512) {
    return make_error("{}: block_count {} out of range 1..512", f.path(), hp.n_layer_all);
  }
  if (known->hybrid) {
    STRATA_ASSIGN(hp.n_nextn, get_positive(f, p + "nextn_predict_layers", 0, false));
  }
  if (hp.n_nextn >= hp.n_layer_all) {
    return make_error("{}: nextn_predict_layers {} must be less than block_count {}", f.path(), hp.n_nextn, hp.n_layer_all);
  }
  hp.n_layer = hp.n_layer_all - hp.n_nextn;
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
  if (hp.n_rot > hp.head_dim_k || hp.n_rot % 2 != 0 || hp.n_rot > 512) {
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
    int64_t sum = 0;
    for (int i = 0; i < 4; ++i) {
      if (sections[i] < 0 || sections[i] > 512) {
        return make_error("{}: rope.dimension_sections[{}] = {} is out of range", f.path(), i, sections[i]);
      }
      hp.rope_sections[i] = static_cast<int32_t>(sections[i]);
      sum += sections[i];
    }
    if (sum < 1) return make_error("{}: rope.dimension_sections must not all be zero", f.path());
  }

  STRATA_TRY(load_experts(f, p, *known, hp));
  if (known->hybrid) STRATA_TRY(load_gated_delta_net(f, p, hp));

  if (!embd) return make_error("{}: missing tensor 'token_embd.weight'", f.path());
  if (embd->ne[0] != hp.n_embd) {
    return make_error("{}: token_embd.weight has width {}, expected embedding_length {}", f.path(), embd->ne[0], hp.n_embd);
  }
  if (embd->ne[1] < 1 || embd->ne[1] > (1 << 30)) return make_error("{}: token_embd.weight has a bad vocab size", f.path());
  hp.n_vocab = static_cast<int32_t>(embd->ne[1]);
  return hp;
}

}  // namespace strata::model
