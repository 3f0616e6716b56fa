// How each tensor is cut for a shard: which axis, and which runs of it (in units of heads, channels,
// rows); the slices themselves (views or copies) and their bytes.
#include <algorithm>
#include <cstring>

#include "base/checked.h"

#include "model/model.h"
#include "model/shard.h"
#include "model/stage_layout.h"

namespace strata::model {
namespace {

enum class Cut {
  kWhole,        // every member holds all of it (norms, router, embeddings)
  kFirst,        // a bias added once per sum: member 0 holds it
  kQRows,        // attention: per query head (q rows, q bias)
  kKvRows,       // attention: per KV head (k, v rows and biases)
  kQCols,        // attn_output columns per query head
  kFfRows,       // dense FFN gate/up rows (and biases)
  kFfCols,       // dense FFN down columns
  kVocabRows,    // output head rows
  kSsmChannels,  // DeltaNet q/k/v channels: attn_qkv rows, conv taps
  kSsmVHeads,    // DeltaNet per value head: z rows, beta/alpha rows, dt bias, A
  kSsmOutCols,   // ssm_out columns per value head
  kExpertRows,   // each routed expert's gate/up rows
  kExpertFused,  // each routed expert's fused gate+up rows
  kExpertCols,   // each routed expert's down columns
  kSharedRows,   // shared expert gate/up rows
  kSharedCols,   // shared expert down columns
};
enum class Axis { kRows, kCols };

// Whether the declaration binds one of these weight slots.
template <typename... Slots>
bool has_slot(const TensorDecl& d, Slots... slots) {
  const auto binds = [&d](auto slot) {
    const auto* s = std::get_if<decltype(slot)>(&d.slot);
    return s && *s == slot;
  };
  return (binds(slots) || ...);
}

Cut cut_of(const TensorDecl& d) {
  using L = LayerWeights;
  using G = GlobalWeights;
  if (d.mtp) return Cut::kWhole;  // the MTP block drafts on one member, whole
  if (has_slot(d, &L::attn_q, &L::attn_q_bias)) return Cut::kQRows;
  if (has_slot(d, &L::attn_k, &L::attn_v, &L::attn_k_bias, &L::attn_v_bias)) return Cut::kKvRows;
  if (has_slot(d, &L::attn_output)) return Cut::kQCols;
  if (has_slot(d, &L::ffn_gate, &L::ffn_up, &L::ffn_gate_bias, &L::ffn_up_bias)) return Cut::kFfRows;
  if (has_slot(d, &L::ffn_down)) return Cut::kFfCols;
  if (has_slot(d, &L::attn_output_bias, &L::ffn_down_bias)) return Cut::kFirst;
  if (has_slot(d, &G::output, &G::output_bias)) return Cut::kVocabRows;
  if (has_slot(d, &L::attn_qkv, &L::ssm_conv1d)) return Cut::kSsmChannels;
  if (has_slot(d, &L::attn_gate, &L::ssm_beta, &L::ssm_alpha, &L::ssm_dt_bias, &L::ssm_a)) return Cut::kSsmVHeads;
  if (has_slot(d, &L::ssm_out)) return Cut::kSsmOutCols;
  if (has_slot(d, &L::ffn_gate_exps, &L::ffn_up_exps)) return Cut::kExpertRows;
  if (has_slot(d, &L::ffn_gate_up_exps)) return Cut::kExpertFused;
  if (has_slot(d, &L::ffn_down_exps)) return Cut::kExpertCols;
  if (has_slot(d, &L::ffn_gate_shexp, &L::ffn_up_shexp)) return Cut::kSharedRows;
  if (has_slot(d, &L::ffn_down_shexp)) return Cut::kSharedCols;
  return Cut::kWhole;
}

// ffn_down_exps is [expert][n_embd rows][F columns]: columns when every expert is cut by rows, the
// held experts' rows when they are whole.
Axis axis_of(const HParams& hp, const Shard& s, Cut cut) {
  switch (cut) {
    case Cut::kExpertCols: return holds_whole_experts(hp, s) ? Axis::kRows : Axis::kCols;
    case Cut::kQCols:
    case Cut::kFfCols:
    case Cut::kSsmOutCols:
    case Cut::kSharedCols: return Axis::kCols;
    default: return Axis::kRows;
  }
}

// The shard's runs of a cut dimension, in units of `parts` (the dimension's count of heads, channels
// or rows): the tensor's axis holds parts x (axis / parts) elements.
struct Pieces {
  int64_t parts = 1;
  std::vector<Range> runs;
};

// DeltaNet: the key range's value heads are one run per block of H_k value heads (v-head h reads
// key head h mod H_k, so each block holds the range's heads at the same offset).
std::vector<Range> value_head_runs(const HParams& hp, Range k) {
  const int32_t Hk = hp.ssm_n_k_heads, r = Hk > 0 ? hp.ssm_n_v_heads / Hk : 0;
  std::vector<Range> runs;
  for (int32_t b = 0; b < r; ++b) runs.push_back({b * Hk + k.begin, b * Hk + k.end});
  return runs;
}

Pieces pieces(const HParams& hp, const Shard& s, Cut cut) {
  const int32_t group = hp.n_head_kv > 0 ? hp.n_head / hp.n_head_kv : 1;
  switch (cut) {
    case Cut::kQRows:
    case Cut::kQCols: return {hp.n_head, {{s.kv_heads.begin * group, s.kv_heads.end * group}}};
    case Cut::kKvRows: return {hp.n_head_kv, {s.kv_heads}};
    case Cut::kFfRows:
    case Cut::kFfCols: return {hp.n_ff, {s.ff}};
    case Cut::kVocabRows: return {hp.n_vocab, {s.vocab}};
    case Cut::kSsmChannels: {  // [q (H_k d_k) | k (H_k d_k) | v (H_v d_v)] channels
      const int32_t Hk = hp.ssm_n_k_heads, dk = hp.ssm_head_k_dim(), dv = hp.ssm_head_v_dim();
      const Range k = s.ssm_k_heads;
      Pieces p{hp.ssm_conv_channels(), {{k.begin * dk, k.end * dk}, {(Hk + k.begin) * dk, (Hk + k.end) * dk}}};
      for (Range v : value_head_runs(hp, k)) p.runs.push_back({2 * Hk * dk + v.begin * dv, 2 * Hk * dk + v.end * dv});
      return p;
    }
    case Cut::kSsmVHeads:
    case Cut::kSsmOutCols: return {hp.ssm_n_v_heads, value_head_runs(hp, s.ssm_k_heads)};
    case Cut::kExpertRows:
    case Cut::kExpertFused: {  // per expert: F rows (fused: F gate rows then F up rows)
      const int32_t F = hp.n_ff_expert, halves = cut == Cut::kExpertFused ? 2 : 1;
      Pieces p{int64_t{F} * halves * hp.n_expert, {}};
      for (int32_t e = s.experts.begin * halves; e < s.experts.end * halves; ++e) {
        const Range r{e * F + s.ff_expert.begin, e * F + s.ff_expert.end};
        if (!p.runs.empty() && p.runs.back().end == r.begin) p.runs.back().end = r.end;  // whole experts: one run
        else p.runs.push_back(r);
      }
      return p;
    }
    case Cut::kExpertCols:
      if (holds_whole_experts(hp, s)) return {hp.n_expert, {s.experts}};
      return {hp.n_ff_expert, {s.ff_expert}};
    case Cut::kSharedRows:
    case Cut::kSharedCols: return {hp.n_ff_shared_expert, {s.ff_shared}};
    default: return {};
  }
}

int64_t run_total(const Pieces& p) {
  int64_t n = 0;
  for (Range r : p.runs) n += r.size();
  return n;
}

// The runs of `m`'s rows (or columns) as one matrix: a view when it is one run of rows, else a copy.
// Columns come out block by block (the runs start on block boundaries: shard_units).
MatrixView gather(const MatrixView& m, Axis axis, const Pieces& p, std::vector<AlignedBuffer>& storage) {
  if (m.empty() || p.parts <= 0) return m;
  const int64_t per = (axis == Axis::kRows ? m.rows : m.cols) / p.parts;
  if (axis == Axis::kRows && p.runs.size() == 1) return m.slice_rows(p.runs[0].begin * per, p.runs[0].size() * per);
  if (axis == Axis::kRows) {
    const int64_t rows = run_total(p) * per;
    AlignedBuffer buf = aligned_buffer(m.row_stride * static_cast<size_t>(rows));
    uint8_t* dst = buf.get();
    for (Range r : p.runs) {
      const size_t bytes = m.row_stride * static_cast<size_t>(r.size() * per);
      std::memcpy(dst, m.row(r.begin * per), bytes);
      dst += bytes;
    }
    MatrixView out{m.type, m.cols, rows, buf.get(), m.row_stride};
    storage.push_back(std::move(buf));
    return out;
  }
  const int64_t cols = run_total(p) * per;
  const size_t width = row_bytes(m.type, cols);
  AlignedBuffer buf = aligned_buffer(width * static_cast<size_t>(m.rows));
  for (int64_t row = 0; row < m.rows; ++row) {
    uint8_t* dst = buf.get() + width * static_cast<size_t>(row);
    for (Range r : p.runs) {
      const size_t bytes = row_bytes(m.type, r.size() * per);
      std::memcpy(dst, m.row(row) + row_bytes(m.type, r.begin * per), bytes);
      dst += bytes;
    }
  }
  MatrixView out{m.type, cols, m.rows, buf.get(), width};
  storage.push_back(std::move(buf));
  return out;
}

VectorView gather(const VectorView& v, const Pieces& p, std::vector<AlignedBuffer>& storage) {
  if (v.empty() || p.parts <= 0) return v;
  const int64_t per = v.n / p.parts;
  if (p.runs.size() == 1) return {v.data + p.runs[0].begin * per, p.runs[0].size() * per};
  const int64_t n = run_total(p) * per;
  AlignedBuffer buf = aligned_buffer(static_cast<size_t>(n) * sizeof(float));
  auto* dst = reinterpret_cast<float*>(buf.get());
  for (Range r : p.runs) dst = std::copy_n(v.data + r.begin * per, r.size() * per, dst);
  VectorView out{reinterpret_cast<const float*>(buf.get()), n};
  storage.push_back(std::move(buf));
  return out;
}

bool is_vector(const TensorDecl& d) {
  return std::visit(
      [](auto slot) {
        using Slot = decltype(slot);
        return std::is_same_v<Slot, VectorView LayerWeights::*> || std::is_same_v<Slot, VectorView GlobalWeights::*>;
      },
      d.slot);
}

// Runs of one piece each, of one length at one step (every expert's rows), as one strided run.
std::vector<ByteRun> fold_runs(const std::vector<ByteRun>& runs) {
  std::vector<ByteRun> out;
  for (const ByteRun& r : runs) {
    if (r.length == 0) continue;
    if (!out.empty() && r.count == 1 && out.back().length == r.length && r.offset > out.back().offset) {
      ByteRun& b = out.back();
      const uint64_t step = r.offset - b.offset;
      if (b.count == 1 && step >= b.length) {
        b.stride = step, b.count = 2;
        continue;
      }
      if (b.count > 1 && b.stride == step / b.count && b.offset + b.count * b.stride == r.offset) {
        ++b.count;
        continue;
      }
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace

uint64_t SliceBytes::bytes(uint64_t nbytes) const {
  if (whole) return nbytes;
  uint64_t n = 0;
  for (const ByteRun& r : runs) n = sat_add(n, sat_mul(r.length, r.count));
  return n;
}

SliceBytes shard_slice_bytes(const HParams& hp, const TensorDecl& d, const gguf::TensorInfo& info, const Shard& s,
                             bool embeds) {
  if (!s.split()) return {};
  const Cut cut = cut_of(d);
  const bool head_rows = head_rows_only(s, embeds) && has_slot(d, &GlobalWeights::token_embd);
  if (cut == Cut::kWhole && !head_rows) return {};
  if (cut == Cut::kFirst) return s.index == 0 ? SliceBytes{} : SliceBytes{false, {}};
  const Pieces p = head_rows ? Pieces{hp.n_vocab, {output_rows(s, hp.n_vocab)}} : pieces(hp, s, cut);
  if (p.parts <= 0) return {};
  const auto cols = info.ne[0], rows = info.n_rows();
  const uint64_t row = row_bytes(info.type, cols);
  std::vector<ByteRun> runs;
  if (is_vector(d)) {  // elements of the whole tensor
    const int64_t per = cols * rows / p.parts;
    for (Range r : p.runs) runs.push_back({row_bytes(info.type, r.begin * per), row_bytes(info.type, r.size() * per), 0, 1});
  } else if (head_rows || axis_of(hp, s, cut) == Axis::kRows) {
    const int64_t per = rows / p.parts;
    for (Range r : p.runs) runs.push_back({row * static_cast<uint64_t>(r.begin * per), row * static_cast<uint64_t>(r.size() * per), 0, 1});
  } else {
    const int64_t per = cols / p.parts;
    for (Range r : p.runs) {
      runs.push_back({row_bytes(info.type, r.begin * per), row_bytes(info.type, r.size() * per), row, static_cast<uint64_t>(rows)});
    }
  }
  return {false, fold_runs(runs)};
}

Status check_slice_bytes(const SliceBytes& slice, uint64_t nbytes) {
  if (slice.whole) return {};
  if (slice.runs.size() > kMaxByteRuns) return make_error("{} byte runs (at most {})", slice.runs.size(), kMaxByteRuns);
  for (const ByteRun& r : slice.runs) {
    const uint64_t last = sat_mul(r.count - (r.count > 0 ? 1 : 0), r.stride);
    const uint64_t end = sat_add(sat_add(r.offset, last), r.length);
    if (r.length == 0 || r.count == 0 || (r.count > 1 && r.stride < r.length) || end == kSaturated || end > nbytes) {
      return make_error("byte run (offset {}, length {}, stride {}, count {}) does not fit a tensor of {} bytes", r.offset,
                        r.length, r.stride, r.count, nbytes);
    }
  }
  if (slice.bytes(nbytes) > nbytes) return make_error("byte runs of {} bytes in all, more than the tensor's {}", slice.bytes(nbytes), nbytes);
  return {};
}

void for_each_piece(const SliceBytes& slice, uint64_t from, uint64_t n,
                    const std::function<void(uint64_t tensor_offset, uint64_t stream_offset, uint64_t length)>& f) {
  if (slice.whole) {
    if (n > 0) f(from, from, n);
    return;
  }
  const uint64_t to = from + n;
  uint64_t base = 0;  // stream offset of the current run's first byte
  for (const ByteRun& r : slice.runs) {
    const uint64_t size = r.length * r.count;
    if (from < base + size && base < to) {
      for (uint64_t i = (std::max(from, base) - base) / r.length; i < r.count && base + i * r.length < to; ++i) {
        const uint64_t piece = base + i * r.length;
        const uint64_t lo = std::max(from, piece), hi = std::min(to, piece + r.length);
        f(r.offset + i * r.stride + (lo - piece), lo, hi - lo);
      }
    }
    base += size;
    if (base >= to) return;
  }
}

uint64_t held_slice_bytes(const gguf::TensorInfo& info, const SliceBytes& slice, bool repack) {
  const uint64_t held = held_bytes(info, repack);
  if (slice.whole || info.nbytes == 0) return held;
  const long double share = static_cast<long double>(slice.bytes(info.nbytes)) / static_cast<long double>(info.nbytes);
  return static_cast<uint64_t>(share * held);
}

uint64_t shard_tensor_bytes(const HParams& hp, const TensorDecl& decl, const gguf::TensorInfo& info, const Shard& shard,
                            bool embeds, bool repack) {
  return held_slice_bytes(info, shard_slice_bytes(hp, decl, info, shard, embeds), repack);
}

uint64_t shard_tensor_bytes(const Model& model, const std::string& name, const Shard& shard, bool repack) {
  for (const Model::Tensor& t : model.tensors()) {
    if (t.decl.name == name) return shard_tensor_bytes(model.hparams(), t.decl, *t.info, shard, true, repack);
  }
  return 0;
}

void slice_weights(Weights& w, const Model& model, const Shard& s, const std::vector<uint8_t>& owned, bool embeds,
                   std::vector<AlignedBuffer>& storage) {
  if (!s.split()) return;
  const HParams& hp = model.hparams();
  for (const Model::Tensor& t : model.tensors()) {
    const TensorDecl& d = t.decl;
    const bool in_layer = d.layer >= 0 && d.layer < hp.n_layer;
    if (in_layer && (d.layer >= static_cast<int>(owned.size()) || !owned[d.layer])) continue;
    const Cut cut = cut_of(d);
    if (cut == Cut::kWhole) continue;
    const Pieces p = pieces(hp, s, cut);
    std::visit(
        [&](auto slot) {
          using Slot = decltype(slot);
          auto& target = [&]() -> auto& {
            if constexpr (std::is_same_v<Slot, MatrixView LayerWeights::*> || std::is_same_v<Slot, VectorView LayerWeights::*>) {
              return w.layers[d.layer].*slot;
            } else {
              return w.global.*slot;
            }
          }();
          using View = std::remove_reference_t<decltype(target)>;
          if (cut == Cut::kFirst) {
            if (s.index != 0) target = View{};
          } else if constexpr (std::is_same_v<View, MatrixView>) {
            target = gather(target, axis_of(hp, s, cut), p, storage);
          } else {
            target = gather(target, p, storage);
          }
        },
        d.slot);
  }
  // A tied head (no output.weight) reads token_embd: its rows of it. A member that does not embed
  // keeps only those rows of token_embd (so only they are repacked, and received without the file).
  if (!model.has_output_weight()) {
    const Range v = output_rows(s, hp.n_vocab);
    w.global.output = w.global.output.slice_rows(v.begin, v.size());
    if (head_rows_only(s, embeds) && !w.global.token_embd.empty()) w.global.token_embd = w.global.output;
  }
}

}  // namespace strata::model
