// Model shape read from GGUF metadata: a struct of numbers, never a chain of arch checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"

namespace strata::model {

enum class RopeType { Norm, Neox, IMrope };

struct HParams {
  std::string arch;        // general.architecture
  std::string name;        // general.name, for display
  int32_t n_layer = 0;     // block_count
  int32_t n_embd = 0;
  int32_t n_vocab = 0;     // rows of token_embd
  int32_t n_ctx_train = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;  // attention.key_length (default n_embd / n_head)
  int32_t head_dim_v = 0;  // attention.value_length
  int32_t n_ff = 0;
  float rms_eps = 1e-5f;

  // Rotary embedding.
  RopeType rope_type = RopeType::Norm;
  int32_t n_rot = 0;
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor (linear scaling)
  int32_t rope_sections[4] = {0, 0, 0, 0};

  // Mixture of experts (0 when dense).
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_expert = 0;
  int32_t n_ff_shared_expert = 0;

  int32_t n_embd_k_gqa() const { return n_head_kv * head_dim_k; }
  int32_t n_embd_v_gqa() const { return n_head_kv * head_dim_v; }
};

// Reads the keys of `file`'s architecture; the error names the missing or malformed key. The vocab
// size comes from token_embd's shape (the tensor may live elsewhere: only its info is needed).
Result<HParams> load_hparams(const gguf::File& file, const gguf::TensorInfo* token_embd);

}  // namespace strata::model
