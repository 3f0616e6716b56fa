#include "model/synth.h"

#include <cmath>

#include "gguf/gguf.h"
#include "model/architecture.h"
#include "text/builtin_vocab.h"

namespace strata::model {
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

// Scale like a trained model: N(0, (gain / sqrt(fan_in))^2); projections that write the residual
// stream get a smaller gain so activations stay O(1) through depth.
struct Init {
  double mean = 0, std = 1;
};
Init init_for(const std::string& name, int64_t fan_in) {
  if (name.find("norm") != std::string::npos) return {1.0, 0.02};
  if (ends_with(name, ".bias")) return {0.0, 0.02};
  if (name == "token_embd.weight") return {0.0, 1.0};
  double gain = 1.0;
  if (name == "output.weight") gain = 4.0;
  if (name.find("attn_output") != std::string::npos || name.find("ffn_down") != std::string::npos) gain = 0.5;
  return {0.0, gain / std::sqrt(static_cast<double>(fan_in))};
}

}  // namespace

Status validate(const SynthSpec& s) {
  if (!find_architecture(s.arch)) return make_error("synth: architecture '{}' is not supported", s.arch);
  if (s.n_layer < 1 || s.n_layer > 512) return make_error("synth: --layers {} out of range 1..512", s.n_layer);
  if (s.n_embd < 1 || s.n_embd > (1 << 16)) return make_error("synth: --embd {} out of range", s.n_embd);
  if (s.n_head < 1 || s.n_head_kv < 1 || s.n_head % s.n_head_kv != 0) {
    return make_error("synth: --heads {} must be a positive multiple of --kv-heads {}", s.n_head, s.n_head_kv);
  }
  const int32_t hd = s.head_dim ? s.head_dim : s.n_embd / s.n_head;
  if (hd < 2 || hd % 2 != 0 || hd > 512) return make_error("synth: head dim {} must be even, 2..512", hd);
  if (s.n_ff < 1) return make_error("synth: --ff {} must be positive", s.n_ff);
  if (s.n_ctx < 1) return make_error("synth: --ctx {} must be positive", s.n_ctx);
  if (s.type != DType::F32 && s.type != DType::F16) return make_error("synth: --type must be f32 or f16");
  return {};
}

Status write_synth_model(const SynthSpec& s, const std::string& path, const std::function<void(size_t, size_t)>& on_tensor) {
  STRATA_TRY(validate(s));
  const text::VocabTables vocab = text::builtin_vocab();
  HParams hp;
  hp.arch = s.arch;
  hp.n_layer = s.n_layer;
  hp.n_embd = s.n_embd;
  hp.n_vocab = static_cast<int32_t>(vocab.tokens.size());
  hp.n_head = s.n_head;
  hp.n_head_kv = s.n_head_kv;
  hp.head_dim_k = hp.head_dim_v = s.head_dim ? s.head_dim : s.n_embd / s.n_head;
  hp.n_ff = s.n_ff;
  hp.n_rot = hp.head_dim_k;

  gguf::Writer w;
  const std::string p = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", "strata synth " + s.arch);
  w.set_string("general.description", "random weights, seed " + std::to_string(s.seed));
  w.set_u32("general.file_type", s.type == DType::F16 ? 1 : 0);
  w.set_u32(p + "block_count", s.n_layer);
  w.set_u32(p + "embedding_length", s.n_embd);
  w.set_u32(p + "context_length", s.n_ctx);
  w.set_u32(p + "feed_forward_length", s.n_ff);
  w.set_u32(p + "attention.head_count", s.n_head);
  w.set_u32(p + "attention.head_count_kv", s.n_head_kv);
  w.set_u32(p + "attention.key_length", hp.head_dim_k);
  w.set_u32(p + "attention.value_length", hp.head_dim_v);
  w.set_u32(p + "rope.dimension_count", hp.n_rot);
  w.set_f32(p + "rope.freq_base", s.rope_base);
  w.set_f32(p + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.set_f32_array("tokenizer.ggml.scores", vocab.scores);
  w.set_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.set_u32("tokenizer.ggml.bos_token_id", vocab.bos);
  w.set_u32("tokenizer.ggml.eos_token_id", vocab.eos);
  w.set_u32("tokenizer.ggml.unknown_token_id", vocab.unk);
  w.set_bool("tokenizer.ggml.add_bos_token", true);

  const Architecture* arch = find_architecture(s.arch);
  std::vector<TensorDecl> decls = arch->declare(hp);
  // Optional tensors are left out (untied head included, as most real models have one).
  std::erase_if(decls, [](const TensorDecl& d) { return !d.required && d.name != "output.weight"; });
  for (size_t i = 0; i < decls.size(); ++i) {
    const TensorDecl& d = decls[i];
    const DType type = d.shape.size() >= 2 ? s.type : DType::F32;
    const uint64_t seed = name_hash(d.name, s.seed);
    const Init init = init_for(d.name, d.shape[0]);
    STRATA_TRY(w.add_tensor(d.name, type, d.shape, [=, &on_tensor, n = decls.size()](uint8_t* dst, uint64_t nbytes) -> Status {
      Rng rng{seed};
      const uint64_t count = nbytes / (type == DType::F32 ? 4 : 2);
      for (uint64_t k = 0; k < count; ++k) {
        const float v = static_cast<float>(init.mean + init.std * rng.normal());
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

}  // namespace strata::model
