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

void Declarations::ffn_norm(int il) { layer(il, "ffn_norm.weight", {hp_.n_embd}, true, &LayerWeights::ffn_norm); }

void Declarations::dense_ffn(int il) {
  const int64_t E = hp_.n_embd, F = hp_.n_ff;
  layer(il, "ffn_gate.weight", {E, F}, true, &LayerWeights::ffn_gate);
  layer(il, "ffn_up.weight", {E, F}, true, &LayerWeights::ffn_up);
  layer(il, "ffn_down.weight", {F, E}, true, &LayerWeights::ffn_down);
}

void Declarations::moe_ffn(int il, bool shared) {
  const int64_t E = hp_.n_embd, F = hp_.n_ff_expert, X = hp_.n_expert;
  const int32_t n = hp_.n_expert;
  layer(il, "ffn_gate_inp.weight", {E, X}, true, &LayerWeights::ffn_gate_inp);
  const std::vector<std::string> fused = {block(il, "ffn_gate_up_exps.weight")};
  for (auto [name, slot] : {std::pair{"ffn_gate_exps.weight", &LayerWeights::ffn_gate_exps},
                             std::pair{"ffn_up_exps.weight", &LayerWeights::ffn_up_exps}}) {
    TensorDecl& d = layer(il, name, {E, F, X}, true, slot);
    d.unless_present = fused;
    d.n_experts = n;
  }
  layer(il, "ffn_gate_up_exps.weight", {E, 2 * F, X}, false, &LayerWeights::ffn_gate_up_exps).n_experts = n;
  layer(il, "ffn_down_exps.weight", {F, E, X}, true, &LayerWeights::ffn_down_exps).n_experts = n;
  if (shared) {
    const int64_t S = hp_.n_ff_shared_expert;
    layer(il, "ffn_gate_inp_shexp.weight", {E}, true, &LayerWeights::ffn_gate_inp_shexp);
    layer(il, "ffn_gate_shexp.weight", {E, S}, true, &LayerWeights::ffn_gate_shexp);
    layer(il, "ffn_up_shexp.weight", {E, S}, true, &LayerWeights::ffn_up_shexp);
    layer(il, "ffn_down_shexp.weight", {S, E}, true, &LayerWeights::ffn_down_shexp);
  }
}

void Declarations::hybrid_norms(int il) {
  layer(il, "attn_norm.weight", {hp_.n_embd}, true, &LayerWeights::attn_norm);
  layer(il, "post_attention_norm.weight", {hp_.n_embd}, true, &LayerWeights::post_attention_norm);
}

void Declarations::gated_attention(int il) {
  const int64_t E = hp_.n_embd, d = hp_.head_dim_k;
  const int64_t q_width = hp_.n_head * d;
  layer(il, "attn_q.weight", {E, 2 * q_width}, true, &LayerWeights::attn_q);
  layer(il, "attn_k.weight", {E, hp_.n_embd_k_gqa()}, true, &LayerWeights::attn_k);
  layer(il, "attn_v.weight", {E, hp_.n_embd_v_gqa()}, true, &LayerWeights::attn_v);
  layer(il, "attn_output.weight", {q_width, E}, true, &LayerWeights::attn_output);
  layer(il, "attn_q_norm.weight", {d}, true, &LayerWeights::attn_q_norm);
  layer(il, "attn_k_norm.weight", {d}, true, &LayerWeights::attn_k_norm);
}

void Declarations::gated_delta_net(int il, bool fused_beta_alpha) {
  const int64_t E = hp_.n_embd, K = hp_.ssm_conv_kernel, C = hp_.ssm_conv_channels();
  const int64_t Hv = hp_.ssm_n_v_heads, dv = hp_.ssm_head_v_dim(), V = hp_.ssm_inner_size;
  const std::vector<std::string> legacy = {block(il, "ssm_in.weight")};
  if (fused_beta_alpha) {
    layer(il, "attn_qkv.weight", {E, C}, true, &LayerWeights::attn_qkv).unless_present = legacy;
    layer(il, "attn_gate.weight", {E, V}, true, &LayerWeights::attn_gate).unless_present = legacy;
    layer(il, "ssm_in.weight", {E, C + V}, false, &LayerWeights::ssm_in);
    layer(il, "ssm_ba.weight", {E, 2 * Hv}, true, &LayerWeights::ssm_ba);
  } else {
    layer(il, "attn_qkv.weight", {E, C}, true, &LayerWeights::attn_qkv);
    layer(il, "attn_gate.weight", {E, V}, true, &LayerWeights::attn_gate);
    layer(il, "ssm_beta.weight", {E, Hv}, true, &LayerWeights::ssm_beta);
    layer(il, "ssm_alpha.weight", {E, Hv}, true, &LayerWeights::ssm_alpha);
  }
  layer(il, "ssm_conv1d.weight", {K, C}, true, &LayerWeights::ssm_conv1d);
  layer(il, "ssm_dt.bias", {Hv}, true, &LayerWeights::ssm_dt_bias);
  layer(il, "ssm_a", {Hv}, true, &LayerWeights::ssm_a);
  layer(il, "ssm_norm.weight", {dv}, true, &LayerWeights::ssm_norm);
  layer(il, "ssm_out.weight", {V, E}, true, &LayerWeights::ssm_out);
}

}  // namespace strata::model
