// Deterministic random-weight models of any declared architecture, streamed to a GGUF file
// (strata synth; the tests and benchmarks write their small models with it).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/dtype.h"
#include "base/result.h"

namespace strata::tools {

struct SynthSpec {
  std::string arch = "llama";
  int32_t n_layer = 4;
  int32_t n_embd = 256;
  int32_t n_head = 8;
  int32_t n_head_kv = 4;
  int32_t head_dim = 0;  // 0: n_embd / n_head
  int32_t n_rot = 0;     // rotary dims; 0: the head dim (a quarter of it for the qwen35 family, as its converter)
  int32_t n_ff = 640;
  int32_t n_ctx = 4096;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  uint64_t seed = 42;
  DType type = DType::F32;  // matrices; norms stay F32
  int32_t n_vocab = 0;       // 0: the built-in vocabulary's size; larger: padded with unused tokens
  bool tied_output = false;  // no output.weight: the head reuses token_embd
  int32_t n_nextn = 0;       // multi-token-prediction blocks after the layers (--mtp: 1; hybrid architectures)

  // Mixture of experts (architectures with routed experts only).
  int32_t n_expert = 8;
  int32_t n_expert_used = 2;
  int32_t n_ff_expert = 128;
  int32_t n_ff_shared_expert = 0;  // 0: n_ff_expert (architectures with a shared expert)

  // Gated DeltaNet (hybrid architectures only). ssm.inner_size = ssm_v_heads * ssm_state.
  int32_t ssm_conv_kernel = 4;
  int32_t ssm_state = 32;          // ssm.state_size: k and v head dim
  int32_t ssm_k_heads = 2;         // ssm.group_count
  int32_t ssm_v_heads = 4;         // ssm.time_step_rank
  int32_t full_attention_interval = 4;
};

// Real model shapes, for benchmarks: "llama-1b" (Llama-3.2-1B: n_embd 2048, 16 layers, 32/8 heads, n_ff 8192,
// vocab 128256, tied output) and "qwen35moe-a3b" (Qwen3.6-35B-A3B's layer shape: n_embd 2048, 40 layers,
// full attention every 4th with 16/2 heads of dim 256, Gated DeltaNet with 16 k-heads and 32 v-heads of
// dim 128, conv 4, experts of ff 512 with 8 used plus a shared expert of ff 512, vocab 248320; the
// expert count is left to the caller so the total fits a small machine while the active size stays real).
Result<SynthSpec> synth_preset(const std::string& name);

// Checks the spec (positive sizes, heads divide, supported arch and type); the error names the field.
Status validate(const SynthSpec& spec);

// Writes the model with the built-in vocabulary. on_tensor(index, count) reports progress.
Status write_synth_model(const SynthSpec& spec, const std::string& path,
                         const std::function<void(size_t, size_t)>& on_tensor = {});

}  // namespace strata::tools
