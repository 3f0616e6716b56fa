#include "model/declare.h"

namespace strata::model {

void Declarations::embeddings_and_head() {
  const int64_t E = hp_.n_embd, V = hp_.n_vocab;
  global("token_embd.weight", kInputLayer, {E, V}, true, &GlobalWeights::token_embd);
  global("output_norm.weight", hp_.n_layer, {E}, true, &GlobalWeights::output_norm);
  global("output.weight", hp_.n_layer, {E, V}, false, &GlobalWeights::output);
  global("output.bias", hp_.n_layer, {V}, false, &GlobalWeights::output_bias);
  global("rope_freqs.weight", kInputLayer, {hp_.n_rot / 2}, false, &GlobalWeights::rope_freqs);
}

void Declarations::attention(int il, bool biases, bool qk_norm) {
  const int64_t E = hp_.n_embd;
  const int64_t q_width = int64_t{hp_.n_head} * hp_.head_dim_k;
  const int64_t k_width = hp_.n_embd_k_gqa(), v_width = hp_.n_embd_v_gqa();
  const int64_t o_width = int64_t{hp_.n_head} * hp_.head_dim_v;
  layer(il, "attn_norm.weight", {E}, true, &LayerWeights::attn_norm);
  layer(il, "attn_q.weight", {E, q_width}, true, &LayerWeights::attn_q);
  layer(il, "attn_k.weight", {E, k_width}, true, &LayerWeights::attn_k);
  layer(il, "attn_v.weight", {E, v_width}, true, &LayerWeights::attn_v);
  layer(il, "attn_output.weight", {o_width, E}, true, &LayerWeights::attn_output);
  if (biases) {
    layer(il, "attn_q.bias", {q_width}, false, &LayerWeights::attn_q_bias);
    layer(il, "attn_k.bias", {k_width}, false, &LayerWeights::attn_k_bias);
    layer(il, "attn_v.bias", {v_width}, false, &LayerWeights::attn_v_bias);
    layer(il, "attn_output.bias", {E}, false, &LayerWeights::attn_output_bias);
  }
  if (qk_norm) {
    layer(il, "attn_q_norm.weight", {hp_.head_dim_k}, true, &LayerWeights::attn_q_norm);
    layer(il, "attn_k_norm.weight", {hp_.head_dim_k}, true, &LayerWeights::attn_k_norm);
  }
}

void Declarations::dense_ffn(int il) {
  const int64_t E = hp_.n_embd, F = hp_.n_ff;
  layer(il, "ffn_norm.weight", {E}, true, &LayerWeights::ffn_norm);
  layer(il, "ffn_gate.weight", {E, F}, true, &LayerWeights::ffn_gate);
  layer(il, "ffn_up.weight", {E, F}, true, &LayerWeights::ffn_up);
  layer(il, "ffn_down.weight", {F, E}, true, &LayerWeights::ffn_down);
}

}  // namespace strata::model
