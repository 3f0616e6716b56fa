// Model shape read from GGUF metadata: a struct of numbers, never a chain of arch checks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"

namespace strata::model {

enum class RopeType { Norm, Neox, IMrope };

struct HParams {
  std::string arch;        // general.architecture
  std::string name;        // general.name, for display
  int32_t n_layer = 0;     // layers the forward pass runs: block_count - nextn_predict_layers
  int32_t n_layer_all = 0; // block_count (MTP blocks included; they are never run)
  int32_t n_nextn = 0;     // nextn_predict_layers: multi-token-prediction blocks appended at the end
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
  int32_t n_rot = 0;       // rope.dimension_count; may be < head_dim (partial rotary)
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor (linear scaling)
  int32_t rope_sections[4] = {0, 0, 0, 0};  // rope.dimension_sections (IMRoPE: pairs of t, h, w, e)

  // Mixture of experts (0 when dense).
  int32_t n_expert = 0;            // expert_count
  int32_t n_expert_used = 0;       // expert_used_count
  int32_t n_ff_expert = 0;         // expert_feed_forward_length
  int32_t n_ff_shared_expert = 0;  // expert_shared_feed_forward_length (0: no shared expert)

  // Gated DeltaNet (linear attention) of the hybrid models (0 when absent).
  int32_t ssm_conv_kernel = 0;     // ssm.conv_kernel: K taps of the causal depthwise conv
  int32_t ssm_inner_size = 0;      // ssm.inner_size: n_v_heads * head_v_dim
  int32_t ssm_state_size = 0;      // ssm.state_size: head_k_dim (= head_v_dim)
  int32_t ssm_n_v_heads = 0;       // ssm.time_step_rank
  int32_t ssm_n_k_heads = 0;       // ssm.group_count
  int32_t full_attention_interval = 0;  // every interval-th layer is full attention
  std::vector<uint8_t> recurrent;  // n_layer flags: 1 for a Gated DeltaNet layer

  int32_t n_embd_k_gqa() const { return n_head_kv * head_dim_k; }
  int32_t n_embd_v_gqa() const { return n_head_kv * head_dim_v; }
  bool is_recurrent(int il) const { return il >= 0 && il < static_cast<int>(recurrent.size()) && recurrent[il] != 0; }
  bool has_recurrent_layers() const;
  int32_t ssm_head_k_dim() const { return ssm_state_size; }
  int32_t ssm_head_v_dim() const { return ssm_n_v_heads ? ssm_inner_size / ssm_n_v_heads : 0; }
  // Channels of the depthwise conv: q and k of every k-head, then v of every v-head.
  int32_t ssm_conv_channels() const { return 2 * ssm_n_k_heads * ssm_state_size + ssm_inner_size; }
};

// Reads the keys of `file`'s architecture (which keys, from its traits in the registry,
// architecture.h); the error names the missing or malformed key. The vocab size comes from
// token_embd's shape (the tensor may live elsewhere: only its info is needed).
Result<HParams> load_hparams(const gguf::File& file, const gguf::TensorInfo* token_embd);

}  // namespace strata::model
