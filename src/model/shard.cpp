// Shards: the steps each dimension is cut in, the slice's hyperparameters and the checks. How each
// tensor is cut is in shard_slice.cpp; which member gets which slice is the planner's
// (plan/shards.h).
#include "model/shard.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <numeric>

#include "model/model.h"
#include "tensor/repack.h"

namespace strata::model {
namespace {

// The smallest number of heads whose `width` columns each hold whole blocks of `block` elements.
int32_t heads_for_blocks(int64_t width, int64_t block) {
  return width > 0 ? static_cast<int32_t>(std::lcm(width, block) / width) : 1;
}

}  // namespace

Shard whole_shard(const HParams& hp) {
  Shard s;
  s.kv_heads = {0, hp.n_head_kv};
  s.ff = {0, hp.n_ff};
  s.vocab = {0, hp.n_vocab};
  s.ssm_k_heads = {0, hp.ssm_n_k_heads};
  s.ff_expert = {0, hp.n_ff_expert};
  s.experts = {0, hp.n_expert};
  s.ff_shared = {0, hp.n_ff_shared_expert};
  return s;
}

Result<ShardUnits> shard_units(const Model& model) {
  const HParams& hp = model.hparams();
  const ArchTraits& traits = model.architecture().traits();
  if (traits.fused_beta_alpha) {
    return make_error("tensor split: {}'s fused Gated DeltaNet projections (ssm_ba, ssm_in) are not sliced; use -sm layer",
                      hp.arch);
  }
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0) {
    return make_error("tensor split: {} heads over {} KV heads cannot be cut", hp.n_head, hp.n_head_kv);
  }
  if (hp.has_recurrent_layers() && (hp.ssm_n_k_heads <= 0 || hp.ssm_n_v_heads % hp.ssm_n_k_heads != 0)) {
    return make_error("tensor split: {} value heads over {} key heads cannot be cut", hp.ssm_n_v_heads, hp.ssm_n_k_heads);
  }
  // Column slices hold whole quant blocks; FFN row slices whole 16-row repack groups too.
  int64_t q_cols = 1, ff = tensor::kRepackRows, ssm_cols = 1, expert = tensor::kRepackRows, shared = tensor::kRepackRows;
  for (const Model::Tensor& t : model.tensors()) {
    const int64_t block = info(t.info->type).block_elems;
    const std::string_view name = t.decl.name;
    if (name.ends_with("attn_output.weight")) q_cols = std::lcm(q_cols, block);
    if (name.ends_with("ffn_down.weight")) ff = std::lcm(ff, block);
    if (name.ends_with("ssm_out.weight")) ssm_cols = std::lcm(ssm_cols, block);
    if (name.ends_with("ffn_down_exps.weight")) expert = std::lcm(expert, block);
    if (name.ends_with("ffn_down_shexp.weight")) shared = std::lcm(shared, block);
  }
  ShardUnits u;
  u.kv_heads = heads_for_blocks(int64_t{hp.n_head / hp.n_head_kv} * hp.head_dim_v, q_cols);
  u.ff = static_cast<int32_t>(ff);
  u.vocab = static_cast<int32_t>(tensor::kRepackRows);
  // ssm_out's columns come in one run per value-head block of the key range: each run whole blocks.
  u.ssm_k_heads = heads_for_blocks(hp.ssm_head_v_dim(), ssm_cols);
  u.ff_expert = static_cast<int32_t>(expert);
  u.ff_shared = static_cast<int32_t>(shared);
  return u;
}

HParams shard_hparams(const HParams& hp, const Shard& s) {
  if (!s.split() || hp.n_head_kv <= 0) return hp;
  HParams local = hp;
  local.n_head = s.kv_heads.size() * (hp.n_head / hp.n_head_kv);
  local.n_head_kv = s.kv_heads.size();
  local.n_ff = s.ff.size();
  if (hp.ssm_n_k_heads > 0) {
    const int32_t r = hp.ssm_n_v_heads / hp.ssm_n_k_heads, dv = hp.ssm_head_v_dim();
    local.ssm_n_k_heads = s.ssm_k_heads.size();
    local.ssm_n_v_heads = r * s.ssm_k_heads.size();
    local.ssm_inner_size = local.ssm_n_v_heads * dv;
  }
  local.n_ff_expert = s.ff_expert.size();
  local.n_ff_shared_expert = s.ff_shared.size();
  return local;
}

Status check_shard(const Model& model, const Shard& s) {
  if (!s.split()) return {};
  if (s.index < 0 || s.index >= s.count || s.count > 64) return make_error("shard {} of {} out of range", s.index, s.count);
  STRATA_ASSIGN(const ShardUnits u, shard_units(model));
  const HParams& hp = model.hparams();
  // A member may hold no heads or no FFN rows (too few steps to go round); it then adds zeros.
  const auto check = [](const char* what, Range r, int32_t total, int32_t unit, bool may_be_empty = true) -> Status {
    if (r.begin < 0 || r.end > total || r.begin > r.end || (!may_be_empty && r.begin == r.end)) {
      return make_error("shard: {} [{}, {}) is {}outside [0, {})", what, r.begin, r.end, may_be_empty ? "" : "empty or ",
                        total);
    }
    if (r.begin % unit != 0 || (r.end % unit != 0 && r.end != total)) {
      return make_error("shard: {} [{}, {}) does not cut on steps of {}", what, r.begin, r.end, unit);
    }
    return {};
  };
  STRATA_TRY(check("KV heads", s.kv_heads, hp.n_head_kv, u.kv_heads));
  STRATA_TRY(check("FFN rows", s.ff, hp.n_ff, u.ff));
  STRATA_TRY(check("DeltaNet key heads", s.ssm_k_heads, hp.ssm_n_k_heads, u.ssm_k_heads));
  STRATA_TRY(check("expert rows", s.ff_expert, hp.n_ff_expert, u.ff_expert));
  STRATA_TRY(check("routed experts", s.experts, hp.n_expert, 1));
  // Either rows of every expert or whole experts: a slice of both is not a cut any member makes.
  if (holds_whole_experts(hp, s) && s.ff_expert.size() < hp.n_ff_expert) {
    return make_error("shard: routed experts [{}, {}) and expert rows [{}, {}) are both partial: cut by rows or by "
                      "experts, not both", s.experts.begin, s.experts.end, s.ff_expert.begin, s.ff_expert.end);
  }
  STRATA_TRY(check("shared expert rows", s.ff_shared, hp.n_ff_shared_expert, u.ff_shared));
  return check("vocabulary rows", s.vocab, hp.n_vocab, u.vocab, false);
}

std::vector<float> widen_logits(std::vector<float> slice, Range vocab, int32_t n_vocab) {
  if (vocab.begin == 0 && vocab.end == n_vocab) return slice;
  const int64_t width = std::max(1, vocab.size());
  const int64_t rows = static_cast<int64_t>(slice.size()) / width;
  std::vector<float> out(static_cast<size_t>(rows) * n_vocab, -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < rows; ++r) std::copy_n(slice.data() + r * width, width, out.data() + r * n_vocab + vocab.begin);
  return out;
}

void merge_logits(std::vector<float>& into, const std::vector<float>& from) {
  if (into.empty()) {
    into = from;
    return;
  }
  for (size_t i = 0; i < into.size() && i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

}  // namespace strata::model
