#include "model/stage_layout.h"

#include <algorithm>
#include <unordered_set>

#include "model/delta_rule.h"
#include "model/gated_delta_net.h"
#include "model/mtp.h"
#include "gguf/names.h"
#include "tensor/repack.h"

namespace strata::model {
namespace {

using gguf::names::tensor::kRopeFreqs;
using gguf::names::tensor::kTokenEmbd;

// The tensor is read by a stage with these roles.
bool reads(const Model::Tensor& t, int32_t n_layer, const std::vector<uint8_t>& owned, bool runs_layers, bool input,
           bool output, bool tied, bool mtp) {
  const TensorDecl& d = t.decl;
  if (d.mtp) return output && mtp;
  if (d.layer >= 0 && d.layer < n_layer) return owned[d.layer] != 0;
  if (d.name == kRopeFreqs) return runs_layers;
  // The tied head reads token_embd, and so does the MTP block (its token embeddings) on a drafting stage.
  if (d.layer == kInputLayer) return input || (output && (tied || mtp) && d.name == kTokenEmbd);
  return output;
}

// Floats of the Scratch buffers the layers kinds of this stage grow (each buffer to its largest use).
struct ScratchFloats {
  uint64_t persistent = 0;  // Scratch members: kept across layers and calls
  uint64_t transient = 0;   // the largest sublayer's temporaries (quantized inputs, routing, tiles)
};

uint64_t nonneg_u64(int64_t v) { return static_cast<uint64_t>(std::max<int64_t>(0, v)); }

ScratchFloats layer_scratch(const HParams& hp, const StageConfig& stage, bool gated, bool moe) {
  const uint64_t T = nonneg_u64(stage.n_batch), E = nonneg_u64(hp.n_embd);
  const uint64_t threads = nonneg_u64(std::max(1, stage.n_threads));
  const uint64_t qw = nonneg_u64(int64_t{hp.n_head} * hp.head_dim_k);
  const uint64_t ow = nonneg_u64(int64_t{hp.n_head} * hp.head_dim_v);
  const uint64_t kw = nonneg_u64(hp.n_embd_k_gqa()), vw = nonneg_u64(hp.n_embd_v_gqa());
  bool attention = false, recurrent = false;
  for (size_t il = 0; il < stage.owned.size(); ++il) {
    if (!stage.owned[il]) continue;
    (hp.is_recurrent(static_cast<int>(il)) ? recurrent : attention) = true;
  }
  // Buffer by buffer, the largest size any sublayer of this stage gives it (blocks.h: Scratch).
  uint64_t gate = 0, up = 0, attn = 0;
  ScratchFloats f;
  f.persistent = 2 * T * E;  // norm, proj
  uint64_t widest_input = std::max(E, ow);
  if (attention) {
    f.persistent += T * (qw + kw + vw) + (gated ? T * 2 * qw : 0);  // q, k, v, qg
    attn = T * (gated ? qw : ow);
    if (gated) gate = T * qw;
    // Per-thread query tiles (attention.cpp: at most 32 rows of head_dim each) and the token order.
    f.transient = std::max(f.transient, threads * 32 * (nonneg_u64(hp.head_dim_k) + 5) + 3 * T);
  }
  if (recurrent) {
    const uint64_t C = nonneg_u64(hp.ssm_conv_channels()), V = nonneg_u64(hp.ssm_inner_size);
    const uint64_t Hv = nonneg_u64(hp.ssm_n_v_heads);
    f.persistent += T * (2 * C + 2 * V + 2 * Hv) + T * std::max(C + V, 2 * Hv);  // mix, conv, z, delta, beta, decay, ba
    widest_input = std::max(widest_input, V);
    // The rows grouped by sequence (the delta rule runs token by token in place).
    f.transient = std::max(f.transient, 2 * T);
  }
  if (moe) {
    const uint64_t X = nonneg_u64(hp.n_expert), R = T * nonneg_u64(hp.n_expert_used), F = nonneg_u64(hp.n_ff_expert);
    const uint64_t S = nonneg_u64(hp.n_ff_shared_expert);
    f.persistent += T * X + R * (2 * E + 2 * F + F) + (S > 0 ? T * E : 0);  // router, expert_in/out, gate(|up), up, shared
    gate = std::max(gate, T * S);
    up = std::max(up, T * S);
    widest_input = std::max(widest_input, S);
    // Gathered rows quantized for gate/up and down (f32 at most), the sort by expert and the routing.
    f.transient = std::max(f.transient, R * (E + F) + 2 * (2 * X + 2 * R) + 2 * R + 2 * X);
  } else if (hp.n_ff > 0) {
    gate = std::max(gate, T * nonneg_u64(hp.n_ff));
    up = std::max(up, T * nonneg_u64(hp.n_ff));
    widest_input = std::max(widest_input, nonneg_u64(hp.n_ff));
  }
  f.persistent += gate + up + attn;
  // A sublayer keeps its normed input quantized (two weight formats at most) while the second
  // projection's input is quantized too; f32 bounds every activation format.
  f.transient += 2 * T * E + T * widest_input;
  return f;
}

bool any_owned(const std::vector<uint8_t>& owned) {
  return std::any_of(owned.begin(), owned.end(), [](uint8_t o) { return o != 0; });
}

}  // namespace

std::vector<std::string> tensors_needed(const Model& model, const std::vector<uint8_t>& owned, bool input, bool output,
                                        bool mtp) {
  const int32_t n_layer = model.hparams().n_layer;
  std::vector<std::string> names;
  if (static_cast<int32_t>(owned.size()) != n_layer) return names;
  const bool runs_layers = any_owned(owned);
  const bool tied = !model.has_output_weight();
  for (const Model::Tensor& t : model.tensors()) {
    if (reads(t, n_layer, owned, runs_layers, input, output, tied, mtp)) names.push_back(t.decl.name);
  }
  return names;
}

memory::KvConfig kv_config(const HParams& model_hp, const Architecture& arch, const StageConfig& stage) {
  const HParams hp = shard_hparams(model_hp, stage.shard);
  memory::KvConfig kv;
  kv.n_layer = hp.n_layer;
  kv.layer_has_kv.assign(static_cast<size_t>(std::max(0, hp.n_layer)), 0);
  for (int il = 0; il < hp.n_layer && il < static_cast<int>(stage.owned.size()); ++il) {
    kv.layer_has_kv[il] = stage.owned[il] && arch.layer_has_kv(hp, il) && hp.n_head_kv > 0 ? 1 : 0;
  }
  kv.n_embd_k = hp.n_embd_k_gqa();
  kv.n_embd_v = hp.n_embd_v_gqa();
  kv.head_dim_k = hp.head_dim_k;
  kv.head_dim_v = hp.head_dim_v;
  kv.n_seq = stage.n_seq;
  kv.n_ctx_per_seq = stage.n_ctx_per_seq;
  kv.type_k = stage.type_k;
  kv.type_v = stage.type_v;
  return kv;
}

memory::KvConfig mtp_kv_config(const HParams& hp, const Architecture& arch, const StageConfig& stage) {
  StageConfig trunk = stage;  // the trunk's cache shape and types, none of its layers
  trunk.owned.assign(static_cast<size_t>(std::max(0, hp.n_layer)), 0);
  trunk.shard = {};
  memory::KvConfig kv = kv_config(hp, arch, trunk);
  kv.n_layer = hp.n_layer + 1;
  kv.layer_has_kv.assign(static_cast<size_t>(kv.n_layer), 0);
  kv.layer_has_kv.back() = 1;
  return kv;
}

uint64_t scratch_bytes(const HParams& hp, const StageConfig& stage) {
  const uint64_t T = nonneg_u64(stage.n_batch), E = nonneg_u64(hp.n_embd), V = nonneg_u64(hp.n_vocab);
  uint64_t floats = T * E;  // the hidden rows the stage runs on
  if (any_owned(stage.owned)) {
    const ScratchFloats f = layer_scratch(hp, stage, hp.has_recurrent_layers(), hp.n_expert > 0);
    floats += f.persistent + f.transient;
  }
  if (stage.output) floats += T * (E + V);  // normed rows, logits
  if (stage.input && !stage.output) floats += T * V;  // logits arriving from the output node
  // Plus the small per-call lists (matmul jobs, routing, thread-pool tasks) of any batch.
  constexpr uint64_t kSmallAllocations = 16 << 10;
  return sat_add(sat_mul(floats, sizeof(float)), kSmallAllocations);
}

Status check_stage(const StageConfig& stage, const HParams& hp) {
  if (static_cast<int32_t>(stage.owned.size()) != hp.n_layer) {
    return make_error("stage: {} layer flags for a {}-layer model", stage.owned.size(), hp.n_layer);
  }
  const auto in = [](int32_t v, int32_t lo, int32_t hi) { return v >= lo && v <= hi; };
  if (!in(stage.n_seq, 1, kMaxStageSeqs)) {
    return make_error("stage: {} sequences (n_seq) out of range 1..{}", stage.n_seq, kMaxStageSeqs);
  }
  if (!in(stage.n_ctx_per_seq, 1, kMaxStageContext)) {
    return make_error("stage: context of {} tokens per sequence (n_ctx_per_seq) out of range 1..{}", stage.n_ctx_per_seq,
                      kMaxStageContext);
  }
  if (!in(stage.n_batch, 1, kMaxStageBatch)) {
    return make_error("stage: batch size {} (n_batch) out of range 1..{}", stage.n_batch, kMaxStageBatch);
  }
  if (!in(stage.n_threads, 1, kMaxStageThreads)) {
    return make_error("stage: {} threads out of range 1..{}", stage.n_threads, kMaxStageThreads);
  }
  if (!in(stage.n_checkpoints, 0, kMaxStageCheckpoints)) {
    return make_error("stage: {} state checkpoints per sequence (n_checkpoints) out of range 0..{}", stage.n_checkpoints,
                      kMaxStageCheckpoints);
  }
  return {};
}

RecurrentBytes recurrent_bytes(const HParams& shard_hp, const std::vector<uint8_t>& owned, int32_t n_seq,
                               int32_t n_checkpoints) {
  if (!shard_hp.has_recurrent_layers() || static_cast<int32_t>(owned.size()) != shard_hp.n_layer) return {};
  memory::RecurrentConfig c = recurrent_config(shard_hp, owned, n_seq);
  const uint64_t state = memory::RecurrentState::bytes_needed(c);  // without checkpoints
  c.n_checkpoints = n_checkpoints;
  return {state, memory::RecurrentState::checkpoint_bytes(c)};
}

uint64_t stash_bytes(const HParams& model_hp, const Architecture& arch, const StageConfig& stage, int32_t n_tokens,
                     int32_t n_checkpoints) {
  StageConfig one = stage;
  one.n_seq = 1;
  one.n_ctx_per_seq = std::max(n_tokens, 0);
  const uint64_t kv = memory::KvCache::bytes_needed(kv_config(model_hp, arch, one));
  const RecurrentBytes r = recurrent_bytes(shard_hparams(model_hp, stage.shard), stage.owned, 1, n_checkpoints);
  return sat_add(kv, sat_add(r.state, r.checkpoints));
}

StageBytes stage_bytes(const HParams& model_hp, const Architecture& arch, const StageConfig& stage, uint64_t weight_bytes) {
  const HParams hp = shard_hparams(model_hp, stage.shard);
  StageBytes b;
  b.weights = weight_bytes;
  b.kv = memory::KvCache::bytes_needed(kv_config(model_hp, arch, stage));
  if (stage.mtp && stage.output) b.kv = sat_add(b.kv, memory::KvCache::bytes_needed(mtp_kv_config(model_hp, arch, stage)));
  const RecurrentBytes r = recurrent_bytes(hp, stage.owned, stage.n_seq, stage.n_checkpoints);
  b.state = r.state;
  b.checkpoints = r.checkpoints;
  b.scratch = scratch_bytes(hp, stage);
  if (stage.mtp) b.scratch = std::max(b.scratch, scratch_bytes(model_hp, stage));  // the block runs unsliced
  return b;
}

bool repacks_tensor(const gguf::TensorInfo& t, bool repack) {
  return repack && t.n_dims >= 2 && tensor::repack_shape(t.type, t.n_rows(), t.ne[0]);
}

uint64_t held_bytes(const gguf::TensorInfo& t, bool repack) {
  if (!repacks_tensor(t, repack)) return t.nbytes;
  return sat_mul(static_cast<uint64_t>(t.n_rows()), static_cast<uint64_t>(tensor::repacked_row_bytes(t.type, t.ne[0])));
}

uint64_t mtp_head_bytes(const Model& model, const StageConfig& stage) {
  if (!stage.mtp || !stage.shard.split() || !model.has_output_weight()) return 0;
  const gguf::TensorInfo* head = model.file().find_tensor(gguf::names::tensor::kOutput);
  return head ? head->nbytes : 0;
}

StageBytes stage_bytes(const Model& model, const StageConfig& stage) {
  const std::unordered_set<std::string_view> listed(stage.tensors.begin(), stage.tensors.end());
  uint64_t weights = 0, file = 0;
  for (const Model::Tensor& t : model.tensors()) {
    if (!listed.count(t.decl.name)) continue;
    const uint64_t held = shard_tensor_bytes(model.hparams(), t.decl, *t.info, stage.shard, stage.input, stage.repack);
    weights = sat_add(weights, held);
    // The file's bytes of the same slice (a slice repacks in the same proportion as the whole).
    const uint64_t whole = held_bytes(*t.info, stage.repack);
    const long double share = whole == 0 ? 0.0L : static_cast<long double>(held) / whole;
    file = sat_add(file, static_cast<uint64_t>(share * t.info->nbytes));
  }
  weights = sat_add(weights, mtp_head_bytes(model, stage));
  file = sat_add(file, mtp_head_bytes(model, stage));
  StageBytes b = stage_bytes(model.hparams(), model.architecture(), stage, weights);
  b.repacked = weights > file ? weights - file : 0;
  return b;
}

}  // namespace strata::model
