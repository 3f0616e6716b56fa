#include "model/declare.h"

namespace strata::model {

namespace names = gguf::names;
namespace tn = gguf::names::tensor;

void Declarations::embeddings_and_head() {
  const int64_t E = hp_.n_embd, V = hp_.n_vocab;
  global(tn::kTokenEmbd, kInputLayer, {E, V}, true, &GlobalWeights::token_embd);
  global(tn::kOutputNorm, hp_.n_layer, {E}, true, &GlobalWeights::output_norm);
  global(tn::kOutput, hp_.n_layer, {E, V}, false, &GlobalWeights::output);
  global(tn::kOutputBias, hp_.n_layer, {V}, false, &GlobalWeights::output_bias);
  global(tn::kRopeFreqs, kInputLayer, {hp_.n_rot / 2}, false, &GlobalWeights::rope_freqs);
}

void Declarations::attention(int il, bool biases, bool qk_norm) {
  const int64_t E = hp_.n_embd;
  const int64_t q_width = int64_t{hp_.n_head} * hp_.head_dim_k;
  const int64_t k_width = hp_.n_embd_k_gqa(), v_width = hp_.n_embd_v_gqa();
  const int64_t o_width = int64_t{hp_.n_head} * hp_.head_dim_v;
  layer(il, tn::kAttnNorm, {E}, true, &LayerWeights::attn_norm);
  layer(il, tn::kAttnQ, {E, q_width}, true, &LayerWeights::attn_q);
  layer(il, tn::kAttnK, {E, k_width}, true, &LayerWeights::attn_k);
  layer(il, tn::kAttnV, {E, v_width}, true, &LayerWeights::attn_v);
  layer(il, tn::kAttnOutput, {o_width, E}, true, &LayerWeights::attn_output);
  if (biases) {
    layer(il, tn::kAttnQ, tn::kBias, {q_width}, false, &LayerWeights::attn_q_bias);
    layer(il, tn::kAttnK, tn::kBias, {k_width}, false, &LayerWeights::attn_k_bias);
    layer(il, tn::kAttnV, tn::kBias, {v_width}, false, &LayerWeights::attn_v_bias);
    layer(il, tn::kAttnOutput, tn::kBias, {E}, false, &LayerWeights::attn_output_bias);
  }
  if (qk_norm) {
    layer(il, tn::kAttnQNorm, {hp_.head_dim_k}, true, &LayerWeights::attn_q_norm);
    layer(il, tn::kAttnKNorm, {hp_.head_dim_k}, true, &LayerWeights::attn_k_norm);
  }
}

void Declarations::ffn_norm(int il) { layer(il, tn::kFfnNorm, {hp_.n_embd}, true, &LayerWeights::ffn_norm); }

void Declarations::dense_ffn(int il) {
  const int64_t E = hp_.n_embd, F = hp_.n_ff;
  layer(il, tn::kFfnGate, {E, F}, true, &LayerWeights::ffn_gate);
  layer(il, tn::kFfnUp, {E, F}, true, &LayerWeights::ffn_up);
  layer(il, tn::kFfnDown, {F, E}, true, &LayerWeights::ffn_down);
}

void Declarations::moe_ffn(int il, bool shared) {
  const int64_t E = hp_.n_embd, F = hp_.n_ff_expert, X = hp_.n_expert;
  const int32_t n = hp_.n_expert;
  layer(il, tn::kFfnGateInp, {E, X}, true, &LayerWeights::ffn_gate_inp);
  const std::vector<std::string> fused = {names::layer_tensor(il, tn::kFfnGateUpExps)};
  for (auto [base, slot] : {std::pair{tn::kFfnGateExps, &LayerWeights::ffn_gate_exps},
                            std::pair{tn::kFfnUpExps, &LayerWeights::ffn_up_exps}}) {
    TensorDecl& d = layer(il, base, {E, F, X}, true, slot);
    d.unless_present = fused;
    d.n_experts = n;
  }
  layer(il, tn::kFfnGateUpExps, {E, 2 * F, X}, false, &LayerWeights::ffn_gate_up_exps).n_experts = n;
  layer(il, tn::kFfnDownExps, {F, E, X}, true, &LayerWeights::ffn_down_exps).n_experts = n;
  if (shared) {
    const int64_t S = hp_.n_ff_shared_expert;
    layer(il, tn::kFfnGateInpShexp, {E}, true, &LayerWeights::ffn_gate_inp_shexp);
    layer(il, tn::kFfnGateShexp, {E, S}, true, &LayerWeights::ffn_gate_shexp);
    layer(il, tn::kFfnUpShexp, {E, S}, true, &LayerWeights::ffn_up_shexp);
    layer(il, tn::kFfnDownShexp, {S, E}, true, &LayerWeights::ffn_down_shexp);
  }
}

void Declarations::hybrid_norms(int il) {
  layer(il, tn::kAttnNorm, {hp_.n_embd}, true, &LayerWeights::attn_norm);
  layer(il, tn::kPostAttentionNorm, {hp_.n_embd}, true, &LayerWeights::post_attention_norm);
}

void Declarations::gated_attention(int il) {
  const int64_t E = hp_.n_embd, d = hp_.head_dim_k;
  const int64_t q_width = hp_.n_head * d;
  layer(il, tn::kAttnQ, {E, 2 * q_width}, true, &LayerWeights::attn_q);
  layer(il, tn::kAttnK, {E, hp_.n_embd_k_gqa()}, true, &LayerWeights::attn_k);
  layer(il, tn::kAttnV, {E, hp_.n_embd_v_gqa()}, true, &LayerWeights::attn_v);
  layer(il, tn::kAttnOutput, {q_width, E}, true, &LayerWeights::attn_output);
  layer(il, tn::kAttnQNorm, {d}, true, &LayerWeights::attn_q_norm);
  layer(il, tn::kAttnKNorm, {d}, true, &LayerWeights::attn_k_norm);
}

void Declarations::nextn(int il) {
  const int64_t E = hp_.n_embd, V = hp_.n_vocab;
  layer(il, tn::kNextnEhProj, {2 * E, E}, true, &LayerWeights::nextn_eh_proj);
  layer(il, tn::kNextnEnorm, {E}, true, &LayerWeights::nextn_enorm);
  layer(il, tn::kNextnHnorm, {E}, true, &LayerWeights::nextn_hnorm);
  layer(il, tn::kNextnEmbedTokens, {E, V}, false, &LayerWeights::nextn_embed_tokens);
  layer(il, tn::kNextnSharedHeadHead, {E, V}, false, &LayerWeights::nextn_shared_head_head);
  layer(il, tn::kNextnSharedHeadNorm, {E}, false, &LayerWeights::nextn_shared_head_norm);
}

void Declarations::mark_mtp(int il) {
  // By name: the output head carries layer index n_layer too, the first MTP block's index.
  const std::string prefix = names::layer_prefix(il);
  for (TensorDecl& d : list_) d.mtp = d.mtp || d.name.starts_with(prefix);
}

void Declarations::gated_delta_net(int il, bool fused_beta_alpha) {
  const int64_t E = hp_.n_embd, K = hp_.ssm_conv_kernel, C = hp_.ssm_conv_channels();
  const int64_t Hv = hp_.ssm_n_v_heads, dv = hp_.ssm_head_v_dim(), V = hp_.ssm_inner_size;
  const std::vector<std::string> legacy = {names::layer_tensor(il, tn::kSsmIn)};
  if (fused_beta_alpha) {
    layer(il, tn::kAttnQkv, {E, C}, true, &LayerWeights::attn_qkv).unless_present = legacy;
    layer(il, tn::kAttnGate, {E, V}, true, &LayerWeights::attn_gate).unless_present = legacy;
    layer(il, tn::kSsmIn, {E, C + V}, false, &LayerWeights::ssm_in);
    layer(il, tn::kSsmBa, {E, 2 * Hv}, true, &LayerWeights::ssm_ba);
  } else {
    layer(il, tn::kAttnQkv, {E, C}, true, &LayerWeights::attn_qkv);
    layer(il, tn::kAttnGate, {E, V}, true, &LayerWeights::attn_gate);
    layer(il, tn::kSsmBeta, {E, Hv}, true, &LayerWeights::ssm_beta);
    layer(il, tn::kSsmAlpha, {E, Hv}, true, &LayerWeights::ssm_alpha);
  }
  layer(il, tn::kSsmConv1d, {K, C}, true, &LayerWeights::ssm_conv1d);
  layer(il, tn::kSsmDt, tn::kBias, {Hv}, true, &LayerWeights::ssm_dt_bias);
  layer(il, tn::kSsmA, "", {Hv}, true, &LayerWeights::ssm_a);
  layer(il, tn::kSsmNorm, {dv}, true, &LayerWeights::ssm_norm);
  layer(il, tn::kSsmOut, {V, E}, true, &LayerWeights::ssm_out);
}

}  // namespace strata::model
