// Deterministic random-weight models of any declared architecture, streamed to a GGUF file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/dtype.h"
#include "base/result.h"

namespace strata::model {

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

// Checks the spec (positive sizes, heads divide, supported arch and type); the error names the field.
Status validate(const SynthSpec& spec);

// Writes the model with the built-in vocabulary. on_tensor(index, count) reports progress.
Status write_synth_model(const SynthSpec& spec, const std::string& path,
                         const std::function<void(size_t, size_t)>& on_tensor = {});

}  // namespace strata::model
