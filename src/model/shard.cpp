#include "model/shard.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>

#include "model/model.h"
#include "model/stage_layout.h"
#include "tensor/repack.h"

namespace strata::model {
namespace {

// How a tensor is cut: by rows or columns of query heads, KV heads, FFN rows or vocabulary rows;
// kFirst: a bias added once per sum, held by shard 0 only; kWhole: every node holds all of it.
enum class Cut { kWhole, kFirst, kQRows, kKvRows, kQCols, kFfRows, kFfCols, kVocabRows, kUnsliced };

template <typename Slot>
bool is(const TensorDecl& d, Slot slot) {
  const auto* s = std::get_if<Slot>(&d.slot);
  return s && *s == slot;
}

Cut cut_of(const TensorDecl& d) {
  using L = LayerWeights;
  using G = GlobalWeights;
  if (is(d, &L::attn_q) || is(d, &L::attn_q_bias)) return Cut::kQRows;
  if (is(d, &L::attn_k) || is(d, &L::attn_v) || is(d, &L::attn_k_bias) || is(d, &L::attn_v_bias)) return Cut::kKvRows;
  if (is(d, &L::attn_output)) return Cut::kQCols;
  if (is(d, &L::ffn_gate) || is(d, &L::ffn_up) || is(d, &L::ffn_gate_bias) || is(d, &L::ffn_up_bias)) return Cut::kFfRows;
  if (is(d, &L::ffn_down)) return Cut::kFfCols;
  if (is(d, &L::attn_output_bias) || is(d, &L::ffn_down_bias)) return Cut::kFirst;
  if (is(d, &G::output) || is(d, &G::output_bias)) return Cut::kVocabRows;
  if (is(d, &L::attn_norm) || is(d, &L::ffn_norm) || is(d, &L::attn_q_norm) || is(d, &L::attn_k_norm) ||
      is(d, &G::token_embd) || is(d, &G::output_norm) || is(d, &G::rope_freqs)) {
    return Cut::kWhole;
  }
  return Cut::kUnsliced;
}

// The shard's part of `total` units of a dimension cut by `cut` (q heads: the KV range times the group).
Range part(const HParams& hp, const Shard& s, Cut cut) {
  const int32_t group = hp.n_head_kv > 0 ? hp.n_head / hp.n_head_kv : 1;
  switch (cut) {
    case Cut::kQRows:
    case Cut::kQCols: return {s.kv_heads.begin * group, s.kv_heads.end * group};
    case Cut::kKvRows: return s.kv_heads;
    case Cut::kFfRows:
    case Cut::kFfCols: return s.ff;
    case Cut::kVocabRows: return s.vocab;
    default: return {};
  }
}

int32_t parts_of(const HParams& hp, Cut cut) {
  switch (cut) {
    case Cut::kQRows:
    case Cut::kQCols: return hp.n_head;
    case Cut::kKvRows: return hp.n_head_kv;
    case Cut::kFfRows:
    case Cut::kFfCols: return hp.n_ff;
    case Cut::kVocabRows: return hp.n_vocab;
    default: return 1;
  }
}

MatrixView rows_of(const MatrixView& m, Range r, int32_t parts) {
  if (m.empty() || parts <= 0) return m;
  const int64_t per = m.rows / parts;
  return m.slice_rows(r.begin * per, r.size() * per);
}

VectorView rows_of(const VectorView& v, Range r, int32_t parts) {
  if (v.empty() || parts <= 0) return v;
  const int64_t per = v.n / parts;
  return {v.data + r.begin * per, r.size() * per};
}

// Columns [c0, c1) of every row, copied (whole quant blocks: c0 and c1 are on block boundaries).
MatrixView cols_of(const MatrixView& m, Range r, int32_t parts, std::vector<AlignedBuffer>& storage) {
  if (m.empty() || parts <= 0) return m;
  const int64_t per = m.cols / parts;
  const int64_t c0 = r.begin * per, cols = r.size() * per;
  const size_t skip = row_bytes(m.type, c0), width = row_bytes(m.type, cols);
  AlignedBuffer buf = aligned_buffer(width * static_cast<size_t>(m.rows));
  for (int64_t row = 0; row < m.rows; ++row) std::memcpy(buf.get() + width * row, m.row(row) + skip, width);
  MatrixView out{m.type, cols, m.rows, buf.get(), width};
  storage.push_back(std::move(buf));
  return out;
}

int64_t lcm64(int64_t a, int64_t b) { return std::lcm(a, b); }

}  // namespace

void AlignedFree::operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }

AlignedBuffer aligned_buffer(size_t bytes) {
  return AlignedBuffer(static_cast<uint8_t*>(::operator new[](std::max<size_t>(bytes, 1), std::align_val_t{64})));
}

Shard whole_shard(const HParams& hp) {
  return Shard{0, 1, {0, hp.n_head_kv}, {0, hp.n_ff}, {0, hp.n_vocab}};
}

Result<ShardUnits> shard_units(const Model& model) {
  const HParams& hp = model.hparams();
  if (hp.has_recurrent_layers()) {
    return make_error("tensor split: {} has Gated DeltaNet layers, which are not sliced yet (use -sm layer)", hp.arch);
  }
  if (hp.n_expert > 0) {
    return make_error("tensor split: {} has mixture-of-experts layers, which are not sliced yet (use -sm layer)", hp.arch);
  }
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0 || hp.n_ff <= 0) {
    return make_error("tensor split: {} heads over {} KV heads and FFN width {} cannot be cut", hp.n_head,
                      hp.n_head_kv, hp.n_ff);
  }
  const int64_t group = hp.n_head / hp.n_head_kv;
  int64_t kv_cols = 1, ff = tensor::kRepackRows;
  for (const Model::Tensor& t : model.tensors()) {
    const Cut cut = cut_of(t.decl);
    if (cut == Cut::kUnsliced) return make_error("tensor split: tensor '{}' has no slicing rule", t.decl.name);
    const int64_t block = info(t.info->type).block_elems;
    // Columns per KV head of attn_output must come in whole blocks: a unit is enough heads for that.
    if (cut == Cut::kQCols) kv_cols = lcm64(kv_cols, block);
    if (cut == Cut::kFfCols) ff = lcm64(ff, block);
  }
  const int64_t head_cols = group * hp.head_dim_v;
  ShardUnits u;
  u.kv_heads = static_cast<int32_t>(lcm64(head_cols, kv_cols) / head_cols);
  u.ff = static_cast<int32_t>(ff);
  u.vocab = static_cast<int32_t>(tensor::kRepackRows);
  return u;
}

namespace {

// n steps over the weights: floor of each share, then the largest remainders get one more.
std::vector<int32_t> apportion(int32_t n, const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  std::vector<int32_t> count(weights.size());
  std::vector<std::pair<double, size_t>> rest;
  int32_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double share = n * weights[i] / total;
    count[i] = static_cast<int32_t>(share);
    given += count[i];
    rest.emplace_back(share - count[i], i);
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < n; ++k, ++given) ++count[rest[k % rest.size()].second];
  return count;
}

std::vector<Range> ranges(int32_t total, int32_t unit, const std::vector<double>& weights) {
  const int32_t steps = (total + unit - 1) / unit;
  std::vector<Range> out;
  int32_t at = 0;
  for (int32_t c : apportion(steps, weights)) {
    out.push_back({std::min(total, at * unit), std::min(total, (at + c) * unit)});
    at += c;
  }
  return out;
}

}  // namespace

Result<std::vector<Shard>> split_shards(const Model& model, const std::vector<double>& weights) {
  if (weights.size() < 2 || weights.size() > 64) return make_error("tensor split: {} members (2..64)", weights.size());
  for (double w : weights) {
    if (!(w > 0) || !std::isfinite(w)) return make_error("tensor split: member weight {} is not positive", w);
  }
  STRATA_ASSIGN(const ShardUnits u, shard_units(model));
  const HParams& hp = model.hparams();
  if (hp.n_vocab / u.vocab < static_cast<int32_t>(weights.size())) {
    return make_error("tensor split: {} vocabulary rows cannot go round {} members", hp.n_vocab, weights.size());
  }
  const std::vector<Range> kv = ranges(hp.n_head_kv, u.kv_heads, weights), ff = ranges(hp.n_ff, u.ff, weights),
                           vocab = ranges(hp.n_vocab, u.vocab, weights);
  std::vector<Shard> shards;
  for (size_t i = 0; i < weights.size(); ++i) {
    shards.push_back({static_cast<int32_t>(i), static_cast<int32_t>(weights.size()), kv[i], ff[i], vocab[i]});
  }
  // Every member computes some of the logits: a share too small for one step of rows is refused.
  for (Shard& s : shards) {
    if (s.vocab.size() > 0) continue;
    return make_error("tensor split: member {} gets no vocabulary rows; give it a larger -ts share", s.index);
  }
  return shards;
}

HParams shard_hparams(const HParams& hp, const Shard& s) {
  if (!s.split() || hp.n_head_kv <= 0) return hp;
  HParams local = hp;
  local.n_head = s.kv_heads.size() * (hp.n_head / hp.n_head_kv);
  local.n_head_kv = s.kv_heads.size();
  local.n_ff = s.ff.size();
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
  return check("vocabulary rows", s.vocab, hp.n_vocab, u.vocab, false);
}

uint64_t shard_tensor_bytes(const HParams& hp, const TensorDecl& decl, const gguf::TensorInfo& info, const Shard& shard) {
  const uint64_t held = held_bytes(info);
  if (!shard.split()) return held;
  const Cut cut = cut_of(decl);
  if (cut == Cut::kFirst) return shard.index == 0 ? held : 0;
  const int32_t parts = parts_of(hp, cut);
  if (cut == Cut::kWhole || cut == Cut::kUnsliced || parts <= 0) return held;
  const Range r = part(hp, shard, cut);
  return held / static_cast<uint64_t>(parts) * static_cast<uint64_t>(std::max(0, r.size()));
}

uint64_t shard_tensor_bytes(const Model& model, const std::string& name, const Shard& shard) {
  for (const Model::Tensor& t : model.tensors()) {
    if (t.decl.name == name) return shard_tensor_bytes(model.hparams(), t.decl, *t.info, shard);
  }
  return 0;
}

std::vector<float> widen_logits(const std::vector<float>& slice, Range vocab, int32_t n_vocab) {
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

void slice_weights(Weights& w, const HParams& hp, const Shard& s, const std::vector<uint8_t>& owned,
                   std::vector<AlignedBuffer>& storage) {
  if (!s.split()) return;
  const Range q = part(hp, s, Cut::kQRows), kv = s.kv_heads, ff = s.ff;
  for (size_t il = 0; il < w.layers.size() && il < owned.size(); ++il) {
    if (!owned[il]) continue;
    LayerWeights& l = w.layers[il];
    l.attn_q = rows_of(l.attn_q, q, hp.n_head);
    l.attn_q_bias = rows_of(l.attn_q_bias, q, hp.n_head);
    l.attn_k = rows_of(l.attn_k, kv, hp.n_head_kv);
    l.attn_k_bias = rows_of(l.attn_k_bias, kv, hp.n_head_kv);
    l.attn_v = rows_of(l.attn_v, kv, hp.n_head_kv);
    l.attn_v_bias = rows_of(l.attn_v_bias, kv, hp.n_head_kv);
    l.attn_output = cols_of(l.attn_output, q, hp.n_head, storage);
    l.ffn_gate = rows_of(l.ffn_gate, ff, hp.n_ff);
    l.ffn_gate_bias = rows_of(l.ffn_gate_bias, ff, hp.n_ff);
    l.ffn_up = rows_of(l.ffn_up, ff, hp.n_ff);
    l.ffn_up_bias = rows_of(l.ffn_up_bias, ff, hp.n_ff);
    l.ffn_down = cols_of(l.ffn_down, ff, hp.n_ff, storage);
    if (s.index != 0) l.attn_output_bias = l.ffn_down_bias = {};
  }
  w.global.output = rows_of(w.global.output, s.vocab, hp.n_vocab);
  w.global.output_bias = rows_of(w.global.output_bias, s.vocab, hp.n_vocab);
}

}  // namespace strata::model
