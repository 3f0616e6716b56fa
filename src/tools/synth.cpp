#include "tools/synth.h"

#include <cmath>
#include <cstring>
#include <variant>

#include "gguf/gguf.h"
#include "gguf/names.h"
#include "model/architecture.h"
#include "text/builtin_vocab.h"

namespace strata::tools {
namespace names = gguf::names;

// The architecture's own declarations decide which tensors a synthetic model has.
using model::ArchTraits;
using model::GlobalWeights;
using model::HParams;
using model::LayerWeights;
using model::RopeType;
using model::TensorDecl;
using model::VectorView;

namespace {

// splitmix64: a tiny, well-mixed generator; each tensor gets a stream seeded from its name.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {  // Box-Muller
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

uint64_t name_hash(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Scale like a trained model (the recipe of shared/models/README.md section 5): matrices
// N(0, (gain / sqrt(fan_in))^2), gain 1 on the input side, 0.5 on projections that write the residual
// stream, 3 for the router, 1.5 for the shared-expert gate, 4 for the output head; norms
// 1 + N(0, 0.02); the delta net's conv taps N(0, 0.3^2), dt bias N(0.5, 0.3^2), ssm_a = -exp(U(log 0.05,
// log 0.6)).
struct Init {
  double mean = 0, std = 1;
  bool log_uniform_decay = false;  // ssm_a
};
Init init_for(const std::string& name, int64_t fan_in) {
  auto has = [&](std::string_view part) { return name.find(part) != std::string::npos; };
  if (has("norm")) return {1.0, 0.02};
  if (has("ssm_dt")) return {0.5, 0.3};
  if (ends_with(name, ".ssm_a")) return {0, 0, true};
  if (has("ssm_conv1d")) return {0.0, 0.3};
  if (ends_with(name, ".bias")) return {0.0, 0.02};
  if (name == names::tensor::kTokenEmbd) return {0.0, 1.0};
  double gain = 1.0;
  if (name == names::tensor::kOutput) gain = 4.0;
  if (has("attn_output") || has("ffn_down") || has("ssm_out")) gain = 0.5;
  if (has("ffn_gate_inp_shexp")) {
    gain = 1.5;
  } else if (has("ffn_gate_inp")) {
    gain = 3.0;
  }
  return {0.0, gain / std::sqrt(static_cast<double>(fan_in))};
}

// The shape the file declares, as HParams (for the architecture's tensor declarations).
HParams synth_hparams(const SynthSpec& s, const ArchTraits& traits, int32_t n_vocab) {
  HParams hp;
  hp.arch = s.arch;
  hp.n_layer = s.n_layer;
  hp.n_nextn = s.n_nextn;
  hp.n_layer_all = s.n_layer + s.n_nextn;
  hp.n_embd = s.n_embd;
  hp.n_vocab = n_vocab;
  hp.n_head = s.n_head;
  hp.n_head_kv = s.n_head_kv;
  hp.head_dim_k = hp.head_dim_v = s.head_dim ? s.head_dim : s.n_embd / s.n_head;
  hp.n_ff = s.n_ff;
  hp.rope_type = traits.rope;
  hp.n_rot = s.n_rot ? s.n_rot : traits.hybrid ? hp.head_dim_k / 4 : hp.head_dim_k;
  // IMRoPE sections: the rotary pairs dealt to t, h, w in turn (the converter's [11, 11, 10, 0] for 32).
  const int32_t pairs = hp.n_rot / 2;
  hp.rope_sections[0] = (pairs + 2) / 3;
  hp.rope_sections[1] = (pairs + 1) / 3;
  hp.rope_sections[2] = pairs / 3;
  if (traits.moe) {
    hp.n_expert = s.n_expert;
    hp.n_expert_used = s.n_expert_used;
    hp.n_ff_expert = s.n_ff_expert;
  }
  if (traits.shared_expert) hp.n_ff_shared_expert = s.n_ff_shared_expert ? s.n_ff_shared_expert : s.n_ff_expert;
  if (traits.hybrid) {
    hp.ssm_conv_kernel = s.ssm_conv_kernel;
    hp.ssm_state_size = s.ssm_state;
    hp.ssm_n_k_heads = s.ssm_k_heads;
    hp.ssm_n_v_heads = s.ssm_v_heads;
    hp.ssm_inner_size = s.ssm_v_heads * s.ssm_state;
    hp.full_attention_interval = s.full_attention_interval;
    hp.recurrent.assign(s.n_layer, 0);
    for (int il = 0; il < s.n_layer; ++il) hp.recurrent[il] = (il + 1) % s.full_attention_interval != 0;
  }
  return hp;
}

void write_keys(gguf::Writer& w, const SynthSpec& s, const ArchTraits& traits, const HParams& hp) {
  auto hkey = [&](std::string_view key) { return names::arch_key(s.arch, key); };
  w.set_string(std::string(names::kArchitecture), s.arch);
  w.set_string(std::string(names::kName), "strata synth " + s.arch);
  w.set_string(std::string(names::kDescription), "random weights, seed " + std::to_string(s.seed));
  w.set_u32(std::string(names::kFileType), s.type == DType::F16 ? 1 : 0);
  w.set_u32(hkey(names::hparam::kBlockCount), hp.n_layer_all);
  if (hp.n_nextn > 0) w.set_u32(hkey(names::hparam::kNextnPredictLayers), hp.n_nextn);
  w.set_u32(hkey(names::hparam::kEmbeddingLength), s.n_embd);
  w.set_u32(hkey(names::hparam::kContextLength), s.n_ctx);
  w.set_u32(hkey(names::hparam::kFeedForwardLength), s.n_ff);
  w.set_u32(hkey(names::hparam::kHeadCount), s.n_head);
  w.set_u32(hkey(names::hparam::kHeadCountKv), s.n_head_kv);
  w.set_u32(hkey(names::hparam::kKeyLength), hp.head_dim_k);
  w.set_u32(hkey(names::hparam::kValueLength), hp.head_dim_v);
  w.set_u32(hkey(names::hparam::kRopeDimensionCount), hp.n_rot);
  w.set_f32(hkey(names::hparam::kRopeFreqBase), s.rope_base);
  w.set_f32(hkey(names::hparam::kRmsEpsilon), s.rms_eps);
  if (traits.rope == RopeType::IMrope) {
    w.set_i32_array(hkey(names::hparam::kRopeDimensionSections), {hp.rope_sections[0], hp.rope_sections[1], hp.rope_sections[2],
                                                    hp.rope_sections[3]});
  }
  if (traits.moe) {
    w.set_u32(hkey(names::hparam::kExpertCount), hp.n_expert);
    w.set_u32(hkey(names::hparam::kExpertUsedCount), hp.n_expert_used);
    w.set_u32(hkey(names::hparam::kExpertFeedForwardLength), hp.n_ff_expert);
  }
  if (traits.shared_expert) w.set_u32(hkey(names::hparam::kExpertSharedFeedForwardLength), hp.n_ff_shared_expert);
  if (traits.hybrid) {
    w.set_u32(hkey(names::hparam::kSsmConvKernel), hp.ssm_conv_kernel);
    w.set_u32(hkey(names::hparam::kSsmStateSize), hp.ssm_state_size);
    w.set_u32(hkey(names::hparam::kSsmGroupCount), hp.ssm_n_k_heads);
    w.set_u32(hkey(names::hparam::kSsmTimeStepRank), hp.ssm_n_v_heads);
    w.set_u32(hkey(names::hparam::kSsmInnerSize), hp.ssm_inner_size);
    w.set_u32(hkey(names::hparam::kFullAttentionInterval), hp.full_attention_interval);
  }
}

}  // namespace

Status validate(const SynthSpec& s) {
  const ArchTraits* traits = model::find_arch_traits(s.arch);
  if (!traits || !model::find_architecture(s.arch)) return make_error("synth: architecture '{}' is not supported", s.arch);
  if (s.n_layer < 1 || s.n_layer > 512) return make_error("synth: --layers {} out of range 1..512", s.n_layer);
  if (s.n_embd < 1 || s.n_embd > (1 << 16)) return make_error("synth: --embd {} out of range", s.n_embd);
  if (s.n_head < 1 || s.n_head_kv < 1 || s.n_head % s.n_head_kv != 0) {
    return make_error("synth: --heads {} must be a positive multiple of --kv-heads {}", s.n_head, s.n_head_kv);
  }
  const int32_t hd = s.head_dim ? s.head_dim : s.n_embd / s.n_head;
  if (hd < 2 || hd % 2 != 0 || hd > 512) return make_error("synth: head dim {} must be even, 2..512", hd);
  const int32_t rot = s.n_rot ? s.n_rot : traits->hybrid ? hd / 4 : hd;
  if (s.n_rot < 0 || rot < 2 || rot % 2 != 0 || rot > hd) {
    return make_error("synth: --rope-dim {} must be even, 2..head dim {}", rot, hd);
  }
  if (s.n_ff < 1) return make_error("synth: --ff {} must be positive", s.n_ff);
  if (s.n_ctx < 1) return make_error("synth: --ctx {} must be positive", s.n_ctx);
  if (s.n_nextn < 0 || s.n_nextn > 1 || (s.n_nextn > 0 && !traits->nextn_blocks)) {
    return make_error("synth: --mtp writes one MTP block, for the architectures that have one (qwen35, qwen35moe, "
                      "qwen3next), not {}", s.arch);
  }
  if (s.type != DType::F32 && s.type != DType::F16) return make_error("synth: --type must be f32 or f16");
  if (traits->moe) {
    if (s.n_expert < 1 || s.n_expert > 4096) return make_error("synth: --experts {} out of range 1..4096", s.n_expert);
    if (s.n_expert_used < 1 || s.n_expert_used > s.n_expert) {
      return make_error("synth: --experts-used {} must be in 1..--experts ({})", s.n_expert_used, s.n_expert);
    }
    if (s.n_ff_expert < 1) return make_error("synth: --expert-ff {} must be positive", s.n_ff_expert);
    if (s.n_ff_shared_expert < 0) return make_error("synth: --shared-ff {} must not be negative", s.n_ff_shared_expert);
  }
  if (traits->hybrid) {
    if (s.ssm_conv_kernel < 1 || s.ssm_conv_kernel > 64) return make_error("synth: --ssm-conv {} out of range 1..64", s.ssm_conv_kernel);
    if (s.ssm_state < 1 || s.ssm_state > 1024) return make_error("synth: --ssm-state {} out of range 1..1024", s.ssm_state);
    if (s.ssm_k_heads < 1 || s.ssm_v_heads < 1 || s.ssm_v_heads % s.ssm_k_heads != 0) {
      return make_error("synth: --ssm-v-heads {} must be a positive multiple of --ssm-k-heads {}", s.ssm_v_heads,
                        s.ssm_k_heads);
    }
    if (s.full_attention_interval < 1) {
      return make_error("synth: --full-attn-interval {} must be positive", s.full_attention_interval);
    }
  }
  return {};
}

Result<SynthSpec> synth_preset(const std::string& name) {
  SynthSpec s;
  if (name == "llama-1b") {
    s.arch = "llama";
    s.n_layer = 16, s.n_embd = 2048, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 8192;
    s.n_ctx = 131072, s.rope_base = 500000.0f, s.n_vocab = 128256, s.tied_output = true;
  } else if (name == "qwen35moe-a3b") {
    s.arch = "qwen35moe";
    s.n_layer = 40, s.n_embd = 2048, s.n_head = 16, s.n_head_kv = 2, s.head_dim = 256, s.n_rot = 64;
    s.n_ff = 512, s.n_expert = 256, s.n_expert_used = 8, s.n_ff_expert = 512, s.n_ff_shared_expert = 512;
    s.ssm_conv_kernel = 4, s.ssm_state = 128, s.ssm_k_heads = 16, s.ssm_v_heads = 32;
    s.full_attention_interval = 4, s.n_ctx = 262144, s.rope_base = 10000000.0f, s.rms_eps = 1e-6f, s.n_vocab = 248320;
  } else {
    return make_error("synth: unknown preset '{}' (llama-1b, qwen35moe-a3b)", name);
  }
  return s;
}

Status write_synth_model(const SynthSpec& s, const std::string& path, const std::function<void(size_t, size_t)>& on_tensor) {
  STRATA_TRY(validate(s));
  text::VocabTables vocab = text::builtin_vocab();
  if (s.n_vocab > 0 && s.n_vocab < static_cast<int32_t>(vocab.tokens.size())) {
    return make_error("synth: --vocab {} is smaller than the built-in vocabulary ({} tokens)", s.n_vocab, vocab.tokens.size());
  }
  // Real vocabulary sizes matter for speed (the output head); the extra tokens are never produced by
  // the tokenizer.
  while (static_cast<int32_t>(vocab.tokens.size()) < s.n_vocab) {
    vocab.tokens.push_back(fmt::format("[PAD{}]", vocab.tokens.size()));
    vocab.scores.push_back(0.0f);
    vocab.types.push_back(static_cast<int32_t>(text::TokenType::Unused));
  }
  const ArchTraits& traits = *model::find_arch_traits(s.arch);
  const HParams hp = synth_hparams(s, traits, static_cast<int32_t>(vocab.tokens.size()));

  gguf::Writer w;
  write_keys(w, s, traits, hp);
  w.set_string(std::string(names::tokenizer::kModel), "llama");
  w.set_string_array(std::string(names::tokenizer::kTokens), vocab.tokens);
  w.set_f32_array(std::string(names::tokenizer::kScores), vocab.scores);
  w.set_i32_array(std::string(names::tokenizer::kTokenType), vocab.types);
  w.set_u32(std::string(names::tokenizer::kBosId), vocab.bos);
  w.set_u32(std::string(names::tokenizer::kEosId), vocab.eos);
  w.set_u32(std::string(names::tokenizer::kUnknownId), vocab.unk);
  w.set_bool(std::string(names::tokenizer::kAddBos), true);

  const model::Architecture* arch = model::find_architecture(s.arch);
  std::vector<TensorDecl> decls = arch->declare(hp);
  // Optional tensors are left out, except the untied head (most real models have one) and the MTP
  // block's own final norm (Qwen3.5's converter writes mtp.norm there; embeddings and head are shared).
  std::erase_if(decls, [&](const TensorDecl& d) {
    if (d.name == names::tensor::kOutput) return s.tied_output;
    return !d.required && !d.name.ends_with(std::string(names::tensor::kNextnSharedHeadNorm) + ".weight");
  });
  for (size_t i = 0; i < decls.size(); ++i) {
    const TensorDecl& d = decls[i];
    // Vectors (norms, conv taps, ...) and the routers stay F32, as llama-quantize leaves them.
    const bool vector_slot = std::holds_alternative<VectorView LayerWeights::*>(d.slot) ||
                             std::holds_alternative<VectorView GlobalWeights::*>(d.slot);
    const bool router = d.name.find("ffn_gate_inp") != std::string::npos;
    const DType type = d.shape.size() >= 2 && !vector_slot && !router ? s.type : DType::F32;
    const uint64_t seed = name_hash(d.name, s.seed);
    const Init init = init_for(d.name, d.shape[0]);
    STRATA_TRY(w.add_tensor(d.name, type, d.shape, [=, &on_tensor, n = decls.size()](uint8_t* dst, uint64_t nbytes) -> Status {
      Rng rng{seed};
      const uint64_t count = nbytes / (type == DType::F32 ? 4 : 2);
      for (uint64_t k = 0; k < count; ++k) {
        const float v = init.log_uniform_decay
                            ? static_cast<float>(-std::exp(std::log(0.05) + (std::log(0.6) - std::log(0.05)) * rng.uniform()))
                            : static_cast<float>(init.mean + init.std * rng.normal());
        if (type == DType::F32) {
          std::memcpy(dst + 4 * k, &v, 4);
        } else {
          const uint16_t h = fp32_to_fp16(v);
          std::memcpy(dst + 2 * k, &h, 2);
        }
      }
      if (on_tensor) on_tensor(i + 1, n);
      return {};
    }));
  }
  return w.write(path);
}

}  // namespace strata::tools
