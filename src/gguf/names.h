// The names GGUF files use, in one table: metadata keys and tensor names. Readers and writers spell a
// name through here, so a typo fails to compile and a search for a constant finds every use of it.
// The spellings are the GGUF convention (llama.cpp's converter writes them); they never change.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace strata::gguf::names {

// Model-wide keys.
inline constexpr std::string_view kArchitecture = "general.architecture";
inline constexpr std::string_view kName = "general.name";
inline constexpr std::string_view kDescription = "general.description";
inline constexpr std::string_view kFileType = "general.file_type";
inline constexpr std::string_view kQuantizationVersion = "general.quantization_version";
inline constexpr std::string_view kAlignment = "general.alignment";
// A model split over several files.
inline constexpr std::string_view kSplitNo = "split.no";
inline constexpr std::string_view kSplitCount = "split.count";
inline constexpr std::string_view kSplitTensorsCount = "split.tensors.count";

// Hyperparameter keys, relative to the architecture: arch_key("qwen2", hparam::kBlockCount) is
// "qwen2.block_count".
namespace hparam {
inline constexpr std::string_view kContextLength = "context_length";
inline constexpr std::string_view kEmbeddingLength = "embedding_length";
inline constexpr std::string_view kBlockCount = "block_count";
inline constexpr std::string_view kFeedForwardLength = "feed_forward_length";
inline constexpr std::string_view kNextnPredictLayers = "nextn_predict_layers";  // MTP blocks at the end
inline constexpr std::string_view kHeadCount = "attention.head_count";
inline constexpr std::string_view kHeadCountKv = "attention.head_count_kv";
inline constexpr std::string_view kKeyLength = "attention.key_length";
inline constexpr std::string_view kValueLength = "attention.value_length";
inline constexpr std::string_view kRmsEpsilon = "attention.layer_norm_rms_epsilon";
inline constexpr std::string_view kRecurrentLayers = "attention.recurrent_layers";
inline constexpr std::string_view kRopeDimensionCount = "rope.dimension_count";
inline constexpr std::string_view kRopeDimensionSections = "rope.dimension_sections";
inline constexpr std::string_view kRopeFreqBase = "rope.freq_base";
inline constexpr std::string_view kRopeScalingType = "rope.scaling.type";
inline constexpr std::string_view kRopeScalingFactor = "rope.scaling.factor";
inline constexpr std::string_view kRopeScaleLinear = "rope.scale_linear";  // older rope.scaling.factor
inline constexpr std::string_view kExpertCount = "expert_count";
inline constexpr std::string_view kExpertUsedCount = "expert_used_count";
inline constexpr std::string_view kExpertFeedForwardLength = "expert_feed_forward_length";
inline constexpr std::string_view kExpertSharedFeedForwardLength = "expert_shared_feed_forward_length";
inline constexpr std::string_view kSsmConvKernel = "ssm.conv_kernel";
inline constexpr std::string_view kSsmInnerSize = "ssm.inner_size";
inline constexpr std::string_view kSsmStateSize = "ssm.state_size";
inline constexpr std::string_view kSsmTimeStepRank = "ssm.time_step_rank";  // value heads
inline constexpr std::string_view kSsmGroupCount = "ssm.group_count";       // key heads
inline constexpr std::string_view kFullAttentionInterval = "full_attention_interval";
}  // namespace hparam

// "<arch>.<key>".
std::string arch_key(std::string_view arch, std::string_view key);

namespace tokenizer {
inline constexpr std::string_view kModel = "tokenizer.ggml.model";
inline constexpr std::string_view kPre = "tokenizer.ggml.pre";
inline constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
inline constexpr std::string_view kScores = "tokenizer.ggml.scores";
inline constexpr std::string_view kTokenType = "tokenizer.ggml.token_type";
inline constexpr std::string_view kMerges = "tokenizer.ggml.merges";
inline constexpr std::string_view kBosId = "tokenizer.ggml.bos_token_id";
inline constexpr std::string_view kEosId = "tokenizer.ggml.eos_token_id";
inline constexpr std::string_view kEotId = "tokenizer.ggml.eot_token_id";
inline constexpr std::string_view kEomId = "tokenizer.ggml.eom_token_id";
inline constexpr std::string_view kUnknownId = "tokenizer.ggml.unknown_token_id";
inline constexpr std::string_view kSeparatorId = "tokenizer.ggml.seperator_token_id";  // sic, as files spell it
inline constexpr std::string_view kPaddingId = "tokenizer.ggml.padding_token_id";
inline constexpr std::string_view kMaskId = "tokenizer.ggml.mask_token_id";
inline constexpr std::string_view kFimPreId = "tokenizer.ggml.fim_pre_token_id";
inline constexpr std::string_view kFimSufId = "tokenizer.ggml.fim_suf_token_id";
inline constexpr std::string_view kFimMidId = "tokenizer.ggml.fim_mid_token_id";
inline constexpr std::string_view kFimPadId = "tokenizer.ggml.fim_pad_token_id";
inline constexpr std::string_view kFimRepId = "tokenizer.ggml.fim_rep_token_id";
inline constexpr std::string_view kFimSepId = "tokenizer.ggml.fim_sep_token_id";
// Older spellings of the FIM ids.
inline constexpr std::string_view kPrefixId = "tokenizer.ggml.prefix_token_id";
inline constexpr std::string_view kSuffixId = "tokenizer.ggml.suffix_token_id";
inline constexpr std::string_view kMiddleId = "tokenizer.ggml.middle_token_id";
inline constexpr std::string_view kAddBos = "tokenizer.ggml.add_bos_token";
inline constexpr std::string_view kAddEos = "tokenizer.ggml.add_eos_token";
inline constexpr std::string_view kAddSep = "tokenizer.ggml.add_sep_token";
inline constexpr std::string_view kAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
inline constexpr std::string_view kNormalizerLowercase = "tokenizer.ggml.normalizer.lowercase";
inline constexpr std::string_view kNormalizerStripAccents = "tokenizer.ggml.normalizer.strip_accents";
inline constexpr std::string_view kChatTemplate = "tokenizer.chat_template";
}  // namespace tokenizer

// Tensor names: model-wide tensors are spelled in full; a layer's tensor is "blk.<il>.<base>.<suffix>"
// (layer_tensor), from one of the bases below.
namespace tensor {
inline constexpr std::string_view kWeight = "weight";
inline constexpr std::string_view kBias = "bias";

inline constexpr std::string_view kTokenEmbd = "token_embd.weight";
inline constexpr std::string_view kOutputNorm = "output_norm.weight";
inline constexpr std::string_view kOutput = "output.weight";  // absent: tied to token_embd
inline constexpr std::string_view kOutputBias = "output.bias";
inline constexpr std::string_view kRopeFreqs = "rope_freqs.weight";

// Attention.
inline constexpr std::string_view kAttnNorm = "attn_norm";
inline constexpr std::string_view kAttnQ = "attn_q";
inline constexpr std::string_view kAttnK = "attn_k";
inline constexpr std::string_view kAttnV = "attn_v";
inline constexpr std::string_view kAttnOutput = "attn_output";
inline constexpr std::string_view kAttnQNorm = "attn_q_norm";
inline constexpr std::string_view kAttnKNorm = "attn_k_norm";
inline constexpr std::string_view kPostAttentionNorm = "post_attention_norm";
// Feed-forward, dense and mixture of experts.
inline constexpr std::string_view kFfnNorm = "ffn_norm";
inline constexpr std::string_view kFfnGate = "ffn_gate";
inline constexpr std::string_view kFfnUp = "ffn_up";
inline constexpr std::string_view kFfnDown = "ffn_down";
inline constexpr std::string_view kFfnGateInp = "ffn_gate_inp";  // the router
inline constexpr std::string_view kFfnGateExps = "ffn_gate_exps";
inline constexpr std::string_view kFfnUpExps = "ffn_up_exps";
inline constexpr std::string_view kFfnGateUpExps = "ffn_gate_up_exps";  // gate and up fused
inline constexpr std::string_view kFfnDownExps = "ffn_down_exps";
inline constexpr std::string_view kFfnGateInpShexp = "ffn_gate_inp_shexp";  // the shared expert's gate
inline constexpr std::string_view kFfnGateShexp = "ffn_gate_shexp";
inline constexpr std::string_view kFfnUpShexp = "ffn_up_shexp";
inline constexpr std::string_view kFfnDownShexp = "ffn_down_shexp";
// Gated DeltaNet.
inline constexpr std::string_view kAttnQkv = "attn_qkv";
inline constexpr std::string_view kAttnGate = "attn_gate";
inline constexpr std::string_view kSsmIn = "ssm_in";  // qkv and gate fused (qwen3next)
inline constexpr std::string_view kSsmBa = "ssm_ba";  // beta and alpha fused (qwen3next)
inline constexpr std::string_view kSsmBeta = "ssm_beta";
inline constexpr std::string_view kSsmAlpha = "ssm_alpha";
inline constexpr std::string_view kSsmConv1d = "ssm_conv1d";
inline constexpr std::string_view kSsmDt = "ssm_dt";  // carries a bias only
inline constexpr std::string_view kSsmA = "ssm_a";    // no suffix: "blk.<il>.ssm_a"
inline constexpr std::string_view kSsmNorm = "ssm_norm";
inline constexpr std::string_view kSsmOut = "ssm_out";
// Multi-token prediction (MTP) blocks, after the trunk's layers: "blk.<il>.nextn.<name>".
inline constexpr std::string_view kNextnEhProj = "nextn.eh_proj";        // {2E, E}: [embedding | hidden] -> E
inline constexpr std::string_view kNextnEnorm = "nextn.enorm";            // the token embedding's norm
inline constexpr std::string_view kNextnHnorm = "nextn.hnorm";            // the trunk hidden state's norm
inline constexpr std::string_view kNextnEmbedTokens = "nextn.embed_tokens";  // optional: else token_embd
inline constexpr std::string_view kNextnSharedHeadHead = "nextn.shared_head_head";  // optional: else the output head
inline constexpr std::string_view kNextnSharedHeadNorm = "nextn.shared_head_norm";  // optional: else output_norm
}  // namespace tensor

inline constexpr std::string_view kLayerPrefix = "blk.";

// "blk.<il>.": how every tensor of layer il starts (placement patterns, per-layer filters).
std::string layer_prefix(int il);

// "blk.<il>.<base>.<suffix>", or "blk.<il>.<base>" for an empty suffix.
std::string layer_tensor(int il, std::string_view base, std::string_view suffix = tensor::kWeight);

// The parts of a layer tensor's name; views into the name parsed.
struct LayerTensorName {
  int layer;
  std::string_view base;
  std::string_view suffix;  // "" for a tensor without one (ssm_a)
};
// Nullopt for a model-wide tensor or a name not of the "blk.<il>.<base>[.<suffix>]" form.
std::optional<LayerTensorName> parse_layer_tensor(std::string_view name);

}  // namespace strata::gguf::names
