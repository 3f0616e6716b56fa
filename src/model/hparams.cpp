#include "model/hparams.h"

#include <fmt/format.h>

#include "gguf/names.h"
#include "model/architecture.h"

namespace strata::model {
namespace {

namespace names = gguf::names;
namespace key = gguf::names::hparam;

// The file being read and its architecture's keys: k(key::kBlockCount) is "<arch>.block_count".
struct Keys {
  const gguf::File& f;
  std::string_view arch;
  std::string operator()(std::string_view name) const { return names::arch_key(arch, name); }
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

// block_count, nextn_predict_layers (MTP blocks, never run), embedding_length, context_length.
Status load_size(const Keys& k, const ArchTraits& arch, HParams& hp) {
  const gguf::File& f = k.f;
  STRATA_ASSIGN(hp.n_layer_all, get_positive(f, k(key::kBlockCount), 0, true));
  STRATA_ASSIGN(hp.n_embd, get_positive(f, k(key::kEmbeddingLength), 0, true));
  STRATA_ASSIGN(hp.n_ctx_train, get_positive(f, k(key::kContextLength), 0, true));
  if (hp.n_layer_all < 1 || hp.n_layer_all > 512) {
    return make_error("{}: {} {} out of range 1..512", f.path(), key::kBlockCount, hp.n_layer_all);
  }
  if (arch.nextn_blocks) {
    STRATA_ASSIGN(hp.n_nextn, get_positive(f, k(key::kNextnPredictLayers), 0, false));
  }
  if (hp.n_nextn >= hp.n_layer_all) {
    return make_error("{}: {} {} must be less than {} {}", f.path(), key::kNextnPredictLayers, hp.n_nextn,
                      key::kBlockCount, hp.n_layer_all);
  }
  hp.n_layer = hp.n_layer_all - hp.n_nextn;
  if (hp.n_embd < 1) return make_error("{}: {} must be positive", f.path(), key::kEmbeddingLength);
  return {};
}

// feed_forward_length, the attention heads and their dims, the RMSNorm epsilon.
Status load_attention(const Keys& k, HParams& hp) {
  const gguf::File& f = k.f;
  STRATA_ASSIGN(hp.n_ff, get_uniform(f, k(key::kFeedForwardLength), 0, false));
  STRATA_ASSIGN(hp.n_head, get_uniform(f, k(key::kHeadCount), 0, true));
  if (hp.n_head < 1) return make_error("{}: {} must be positive", f.path(), key::kHeadCount);
  STRATA_ASSIGN(hp.n_head_kv, get_uniform(f, k(key::kHeadCountKv), hp.n_head, false));
  if (hp.n_head_kv < 1 || hp.n_head % hp.n_head_kv != 0) {
    return make_error("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), hp.n_head, hp.n_head_kv);
  }
  STRATA_ASSIGN(hp.head_dim_k, get_positive(f, k(key::kKeyLength), hp.n_embd / hp.n_head, false));
  STRATA_ASSIGN(hp.head_dim_v, get_positive(f, k(key::kValueLength), hp.n_embd / hp.n_head, false));
  if (hp.head_dim_k < 1 || hp.head_dim_v < 1) return make_error("{}: head dimension must be positive", f.path());
  const std::string eps = k(key::kRmsEpsilon);
  if (!f.has(eps)) return make_error("{}: missing required key '{}'", f.path(), eps);
  STRATA_ASSIGN(hp.rms_eps, f.get_f32(eps));
  return {};
}

// rope.dimension_sections: IMRoPE's rotary pairs for time, height, width and extra.
Status load_rope_sections(const Keys& k, HParams& hp) {
  const gguf::File& f = k.f;
  STRATA_ASSIGN(std::vector<int64_t> sections, f.get_int_array(k(key::kRopeDimensionSections)));
  if (sections.size() != 4) return make_error("{}: {} must have 4 values", f.path(), key::kRopeDimensionSections);
  int64_t sum = 0;
  for (int i = 0; i < 4; ++i) {
    if (sections[i] < 0 || sections[i] > 512) {
      return make_error("{}: {}[{}] = {} is out of range", f.path(), key::kRopeDimensionSections, i, sections[i]);
    }
    hp.rope_sections[i] = static_cast<int32_t>(sections[i]);
    sum += sections[i];
  }
  if (sum < 1) return make_error("{}: {} must not all be zero", f.path(), key::kRopeDimensionSections);
  return {};
}

// Rotary dims, base and linear scaling; the rope type itself is the architecture's.
Status load_rope(const Keys& k, HParams& hp) {
  const gguf::File& f = k.f;
  STRATA_ASSIGN(hp.n_rot, get_positive(f, k(key::kRopeDimensionCount), hp.head_dim_k, false));
  if (hp.n_rot > hp.head_dim_k || hp.n_rot % 2 != 0 || hp.n_rot > 512) {
    return make_error("{}: {} {} must be even and <= head dim {}", f.path(), key::kRopeDimensionCount, hp.n_rot,
                      hp.head_dim_k);
  }
  STRATA_ASSIGN(hp.rope_base, f.get_f32_or(k(key::kRopeFreqBase), 10000.0f));
  STRATA_ASSIGN(std::string_view scaling, f.get_string_or(k(key::kRopeScalingType), "linear"));
  if (scaling != "linear" && scaling != "none") {
    return make_error("{}: {} '{}' is not supported (linear or none)", f.path(), key::kRopeScalingType, scaling);
  }
  float factor = 0.0f;
  if (f.has(k(key::kRopeScalingFactor))) {
    STRATA_ASSIGN(factor, f.get_f32(k(key::kRopeScalingFactor)));
  } else if (f.has(k(key::kRopeScaleLinear))) {
    STRATA_ASSIGN(factor, f.get_f32(k(key::kRopeScaleLinear)));
  }
  hp.rope_freq_scale = (factor == 0.0f || scaling == "none") ? 1.0f : 1.0f / factor;
  if (!(hp.rope_base > 0.0f) || !(hp.rope_freq_scale > 0.0f)) {
    return make_error("{}: {} and rope scaling must be positive", f.path(), key::kRopeFreqBase);
  }
  if (hp.rope_type == RopeType::IMrope) STRATA_TRY(load_rope_sections(k, hp));
  return {};
}

Status load_experts(const Keys& k, const ArchTraits& arch, HParams& hp) {
  const gguf::File& f = k.f;
  const std::string count = k(key::kExpertCount), used = k(key::kExpertUsedCount);
  STRATA_ASSIGN(hp.n_expert, get_positive(f, count, 0, arch.moe));
  STRATA_ASSIGN(hp.n_expert_used, get_positive(f, used, 0, arch.moe));
  if (arch.moe && (hp.n_expert < 1 || hp.n_expert_used < 1)) {
    return make_error("{}: keys '{}' ({}) and '{}' ({}) must be positive", f.path(), count, hp.n_expert, used,
                      hp.n_expert_used);
  }
  if (hp.n_expert_used > hp.n_expert) {
    return make_error("{}: key '{}' ({}) exceeds '{}' ({})", f.path(), used, hp.n_expert_used, count, hp.n_expert);
  }
  const std::string ff = k(key::kExpertFeedForwardLength);
  STRATA_ASSIGN(hp.n_ff_expert, get_positive(f, ff, hp.n_expert_used ? hp.n_ff / hp.n_expert_used : 0, false));
  if (arch.moe && hp.n_ff_expert < 1) {
    return make_error("{}: key '{}' is missing or zero (and {} gives no default)", f.path(), ff,
                      key::kFeedForwardLength);
  }
  if (arch.shared_expert) {
    const std::string shared_ff = k(key::kExpertSharedFeedForwardLength);
    STRATA_ASSIGN(hp.n_ff_shared_expert, get_positive(f, shared_ff, hp.n_ff, false));
    if (hp.n_ff_shared_expert < 1) {
      return make_error("{}: key '{}' is missing or zero (and {} gives no default)", f.path(), shared_ff,
                        key::kFeedForwardLength);
    }
  }
  return {};
}

// Which layers are recurrent: attention.recurrent_layers (a scalar, or one bool/int per block) when
// present, else every layer but each full_attention_interval-th. MTP blocks are never run.
Status load_layer_pattern(const Keys& k, HParams& hp) {
  const gguf::File& f = k.f;
  hp.recurrent.assign(hp.n_layer, 0);
  const std::string pattern = k(key::kRecurrentLayers);
  if (const gguf::KeyValue* kv = f.find(pattern)) {
    std::vector<int64_t> flags;
    if (kv->type == gguf::ValueType::ARRAY) {
      STRATA_ASSIGN(flags, f.get_int_array(pattern));
      if (static_cast<int64_t>(flags.size()) != hp.n_layer_all) {
        return make_error("{}: key '{}' has {} values, expected {} = {}", f.path(), pattern, flags.size(),
                          key::kBlockCount, hp.n_layer_all);
      }
    } else if (kv->type == gguf::ValueType::BOOL) {
      STRATA_ASSIGN(bool b, f.get_bool(pattern));
      flags.assign(hp.n_layer_all, b ? 1 : 0);
    } else {
      STRATA_ASSIGN(int64_t v, f.get_int(pattern));
      flags.assign(hp.n_layer_all, v);
    }
    for (int il = 0; il < hp.n_layer; ++il) hp.recurrent[il] = flags[il] != 0;
    return {};
  }
  const std::string interval = k(key::kFullAttentionInterval);
  STRATA_ASSIGN(hp.full_attention_interval, get_positive(f, interval, 4, false));
  if (hp.full_attention_interval < 1) return make_error("{}: key '{}' must be positive", f.path(), interval);
  for (int il = 0; il < hp.n_layer; ++il) hp.recurrent[il] = (il + 1) % hp.full_attention_interval != 0;
  return {};
}

// The ssm.* keys and how they must relate (value heads a multiple of key heads, inner = heads x state).
Status load_gated_delta_net(const Keys& k, HParams& hp) {
  const gguf::File& f = k.f;
  const struct {
    std::string_view key;
    int32_t* value;
    int32_t max;
  } fields[] = {{key::kSsmConvKernel, &hp.ssm_conv_kernel, 64},
                {key::kSsmInnerSize, &hp.ssm_inner_size, 1 << 20},
                {key::kSsmStateSize, &hp.ssm_state_size, 1024},
                {key::kSsmTimeStepRank, &hp.ssm_n_v_heads, 4096},
                {key::kSsmGroupCount, &hp.ssm_n_k_heads, 4096}};
  // All are read before any is range-checked, so a missing key is reported first.
  for (const auto& field : fields) {
    STRATA_ASSIGN(*field.value, get_positive(f, k(field.key), 0, true));
  }
  for (const auto& field : fields) {
    if (*field.value < 1 || *field.value > field.max) {
      return make_error("{}: key '{}' = {} is out of range 1..{}", f.path(), k(field.key), *field.value, field.max);
    }
  }
  if (hp.ssm_n_v_heads % hp.ssm_n_k_heads != 0) {
    return make_error("{}: key '{}' ({} value heads) must be a multiple of '{}' ({})", f.path(),
                      k(key::kSsmTimeStepRank), hp.ssm_n_v_heads, k(key::kSsmGroupCount), hp.ssm_n_k_heads);
  }
  if (int64_t{hp.ssm_n_v_heads} * hp.ssm_state_size != hp.ssm_inner_size) {
    return make_error("{}: key '{}' ({}) must equal {} ({}) x {} ({})", f.path(), k(key::kSsmInnerSize),
                      hp.ssm_inner_size, key::kSsmTimeStepRank, hp.ssm_n_v_heads, key::kSsmStateSize, hp.ssm_state_size);
  }
  if (hp.head_dim_k != hp.head_dim_v) {
    return make_error("{}: keys '{}' ({}) and 'value_length' ({}) must be equal", f.path(), k(key::kKeyLength),
                      hp.head_dim_k, hp.head_dim_v);
  }
  return load_layer_pattern(k, hp);
}

Status load_vocab_size(const gguf::File& f, const gguf::TensorInfo* embd, HParams& hp) {
  const std::string_view name = names::tensor::kTokenEmbd;
  if (!embd) return make_error("{}: missing tensor '{}'", f.path(), name);
  if (embd->ne[0] != hp.n_embd) {
    return make_error("{}: {} has width {}, expected {} {}", f.path(), name, embd->ne[0], key::kEmbeddingLength,
                      hp.n_embd);
  }
  if (embd->ne[1] < 1 || embd->ne[1] > (1 << 30)) return make_error("{}: {} has a bad vocab size", f.path(), name);
  hp.n_vocab = static_cast<int32_t>(embd->ne[1]);
  return {};
}

}  // namespace

bool HParams::has_recurrent_layers() const {
  for (uint8_t r : recurrent) {
    if (r) return true;
  }
  return false;
}

Result<HParams> load_hparams(const gguf::File& f, const gguf::TensorInfo* embd) {
  HParams hp;
  STRATA_ASSIGN(std::string_view arch, f.get_string(names::kArchitecture));
  hp.arch = std::string(arch);
  const Result<const Architecture*> spec = require_architecture(arch);
  if (!spec.ok()) return make_error("{}: {}", f.path(), spec.error().message);
  const ArchTraits& traits = (*spec)->traits();
  hp.rope_type = traits.rope;
  STRATA_ASSIGN(std::string_view name, f.get_string_or(names::kName, arch));
  hp.name = std::string(name);

  const Keys k{f, hp.arch};
  STRATA_TRY(load_size(k, traits, hp));
  STRATA_TRY(load_attention(k, hp));
  STRATA_TRY(load_rope(k, hp));
  STRATA_TRY(load_experts(k, traits, hp));
  if (traits.hybrid) STRATA_TRY(load_gated_delta_net(k, hp));
  STRATA_TRY(load_vocab_size(f, embd, hp));
  return hp;
}

}  // namespace strata::model
