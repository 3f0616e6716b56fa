#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/dtype.h"
#include "memory/kv_cache.h"
#include "tensor/attention_kernels.h"
#include "tensor/quants.h"
#include "tensor/thread_pool.h"

namespace strata::model {
namespace {

constexpr int32_t kMaxRows = 32;       // query rows per work item (K/V tiles are shared by all)
constexpr int32_t kMaxTokens = 8;      // tokens per work item
constexpr int32_t kTilesPerSpan = 16;  // a row's positions are cut into spans of this many tiles

struct TokenBlock {
  int32_t first;  // into the seq-sorted token order
  int32_t count;
};

// Q meets the keys in the format llama.cpp's flash attention converts it to for their type (its
// vec_dot_type): F16 for F16 keys, Q8_0 for Q8_0 and Q4_0 keys. Here it is rounded through that
// format and back, so the kernel's F32 dot sees the values llama.cpp's dot sees.
void round_query(DType k_type, const float* q, float* out, int32_t dk, std::vector<uint8_t>& rounded) {
  const DType format = k_type == DType::F16 ? DType::F16 : DType::Q8_0;
  rounded.resize(row_bytes(format, dk));
  tensor::quantize_activations(format, q, rounded.data(), dk);
  tensor::dequantize_row(format, rounded.data(), out, dk);
}

// The query rows of one work item (a token block x a run of heads of one KV group), set up as the
// kernel takes them (queries rounded as round_query says).
struct ItemRows {
  std::vector<float> q16;
  std::vector<uint8_t> rounded;  // a query in the keys' dot format
  std::vector<const float*> q;
  std::vector<float*> out;
  std::vector<int32_t> n_kv;
  tensor::AttentionTask task;
};

// Every row's result depends only on its query, n_kv and the cache: its positions are cut into
// spans at fixed absolute offsets (kTilesPerSpan tiles), each span is one online softmax, and the
// spans are combined in order (tensor::combine_attention_spans). Rows within one span give exactly
// the unsplit kernel's bits. Few work items (decode) split their spans over the threads
// (flash-decoding) so one sequence uses every core; many (prompts) run their spans in turn.
class Attention {
 public:
  Attention(const LayerContext& ctx, int il, const float* q_all, float* out, tensor::AttentionFn kernel)
      : ctx_(ctx), il_(il), q_all_(q_all), out_(out), kernel_(kernel) {
    const HParams& hp = ctx.hp;
    group_ = hp.n_head / hp.n_head_kv;
    heads_per_item_ = std::min(group_, kMaxRows);
    head_chunks_ = (group_ + heads_per_item_ - 1) / heads_per_item_;
    per_block_ = int64_t{hp.n_head_kv} * head_chunks_;
    span_ = kTilesPerSpan * tensor::attention_tile_positions(hp.head_dim_k, hp.head_dim_v);
    cut_blocks();
  }

  void run() {
    const int64_t items = static_cast<int64_t>(blocks_.size()) * per_block_;
    if (items >= 2 * ctx_.pool.size() || max_spans_ == 1) {
      ctx_.pool.parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
        thread_local ItemRows rows;
        for (int64_t item = i0; item < i1; ++item) run_item(item, rows);
      });
      return;
    }
    // Flash-decoding: every (item, span) is a task of its own; partial sums go to parts_.
    const int32_t S = max_spans_;
    const int32_t dv = ctx_.hp.head_dim_v;
    parts_.assign(static_cast<size_t>(items) * S * kMaxRows * (dv + 2), 0.0f);
    ctx_.pool.parallel_for(items * S, 1, [&](int64_t i0, int64_t i1) {
      thread_local ItemRows rows;
      for (int64_t k = i0; k < i1; ++k) {
        setup(k / S, rows);
        const int32_t s = static_cast<int32_t>(k % S);
        float* base = part(k / S, s);
        for (int32_t r = 0; r < rows.task.n_rows; ++r) rows.out[r] = base + int64_t{r} * dv;
        run_span(rows, s, base + int64_t{kMaxRows} * dv);
      }
    });
    ctx_.pool.parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
      thread_local ItemRows rows;
      for (int64_t item = i0; item < i1; ++item) {
        setup(item, rows);
        combine(rows, [&](int32_t s) { return part(item, s); });
      }
    });
  }

 private:
  // Tokens by sequence (batch order within one), cut into blocks that share K/V tiles.
  void cut_blocks() {
    const Batch& batch = ctx_.batch;
    const int32_t T = static_cast<int32_t>(batch.size());
    const int32_t tokens_per_item = std::clamp(kMaxRows / heads_per_item_, 1, kMaxTokens);
    order_.resize(T);
    for (int32_t t = 0; t < T; ++t) order_[t] = t;
    std::stable_sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) { return batch.seq[a] < batch.seq[b]; });
    for (int32_t i = 0; i < T;) {
      int32_t e = i + 1;
      while (e < T && e - i < tokens_per_item && batch.seq[order_[e]] == batch.seq[order_[i]]) ++e;
      blocks_.push_back({i, e - i});
      i = e;
    }
    max_spans_ = 1;
    for (int32_t t = 0; t < T; ++t) max_spans_ = std::max(max_spans_, batch.pos[t] / span_ + 1);
  }

  float* part(int64_t item, int32_t s) {
    const int32_t dv = ctx_.hp.head_dim_v;
    return parts_.data() + (static_cast<size_t>(item) * max_spans_ + s) * kMaxRows * (dv + 2);
  }

  void setup(int64_t item, ItemRows& rows) const;
  void run_item(int64_t item, ItemRows& rows) const;

  // The kernel over span s of rows' positions; m then l (n_rows each) at ml.
  void run_span(ItemRows& rows, int32_t s, float* ml) const {
    rows.task.p_begin = s * span_;
    rows.task.p_end = (s + 1) * span_;
    rows.task.m = ml;
    rows.task.l = ml + kMaxRows;
    kernel_(rows.task);
  }

  // Combines the spans of every row into its output; span_at(s) gives span s's partial block.
  template <typename SpanAt>
  void combine(const ItemRows& rows, SpanAt span_at) const {
    const int32_t dv = ctx_.hp.head_dim_v;
    thread_local std::vector<const float*> acc;
    thread_local std::vector<float> m, l;
    for (int32_t r = 0; r < rows.task.n_rows; ++r) {
      const int32_t n = (rows.n_kv[r] - 1) / span_ + 1;
      acc.resize(n), m.resize(n), l.resize(n);
      for (int32_t s = 0; s < n; ++s) {
        const float* p = span_at(s);
        acc[s] = p + int64_t{r} * dv;
        m[s] = p[int64_t{kMaxRows} * dv + r];
        l[s] = p[int64_t{kMaxRows} * dv + kMaxRows + r];
      }
      tensor::combine_attention_spans(n, acc.data(), m.data(), l.data(), dv, rows.out[r]);
    }
  }

  const LayerContext& ctx_;
  int il_;
  const float* q_all_;
  float* out_;
  tensor::AttentionFn kernel_;
  int32_t group_ = 1, heads_per_item_ = 1, head_chunks_ = 1, span_ = 1, max_spans_ = 1;
  int64_t per_block_ = 1;
  std::vector<int32_t> order_;
  std::vector<TokenBlock> blocks_;
  std::vector<float> parts_;
};

void Attention::setup(int64_t item, ItemRows& rows) const {
  const HParams& hp = ctx_.hp;
  const memory::KvCache& kv = ctx_.kv;
  const int32_t dk = hp.head_dim_k, dv = hp.head_dim_v;
  const TokenBlock& b = blocks_[item / per_block_];
  const int32_t hk = static_cast<int32_t>(item % per_block_ / head_chunks_);
  const int32_t h0 = hk * group_ + static_cast<int32_t>(item % head_chunks_) * heads_per_item_;
  const int32_t nh = std::min(heads_per_item_, (hk + 1) * group_ - h0);
  const int32_t n = b.count * nh;
  rows.q16.resize(int64_t{n} * dk);
  rows.q.resize(n);
  rows.out.resize(n);
  rows.n_kv.resize(n);
  for (int32_t j = 0; j < b.count; ++j) {
    const int32_t t = order_[b.first + j];
    for (int32_t h = 0; h < nh; ++h) {
      const int32_t r = j * nh + h;
      const float* q = q_all_ + (int64_t{t} * hp.n_head + h0 + h) * dk;
      float* qr = rows.q16.data() + int64_t{r} * dk;
      round_query(kv.config().type_k, q, qr, dk, rows.rounded);
      rows.q[r] = qr;
      rows.out[r] = out_ + (int64_t{t} * hp.n_head + h0 + h) * dv;
      rows.n_kv[r] = ctx_.batch.pos[t] + 1;
    }
  }
  const int32_t seq = ctx_.batch.seq[order_[b.first]];
  tensor::AttentionTask& task = rows.task;
  task = tensor::AttentionTask{};
  task.n_rows = n;
  task.q = rows.q.data();
  task.out = rows.out.data();
  task.n_kv = rows.n_kv.data();
  task.k = kv.k(il_, seq, hk, 0);
  task.v = kv.v(il_, seq, hk, 0);
  task.k_stride_bytes = static_cast<int64_t>(kv.k_head_bytes());
  task.v_stride_bytes = static_cast<int64_t>(kv.v_head_bytes());
  task.k_type = kv.config().type_k;
  task.v_type = kv.config().type_v;
  task.dk = dk;
  task.dv = dv;
  task.scale = 1.0f / std::sqrt(static_cast<float>(dk));
}

// One item on this thread: the plain kernel when every row fits in one span, else its spans in turn.
void Attention::run_item(int64_t item, ItemRows& rows) const {
  setup(item, rows);
  const int32_t n_max = *std::max_element(rows.n_kv.begin(), rows.n_kv.end());
  const int32_t spans = (n_max - 1) / span_ + 1;
  if (spans == 1) {
    kernel_(rows.task);
    return;
  }
  const int32_t dv = ctx_.hp.head_dim_v;
  thread_local std::vector<float> parts;
  const size_t block = size_t{kMaxRows} * (dv + 2);
  parts.assign(block * spans, 0.0f);
  std::vector<float*> outs = rows.out;
  for (int32_t s = 0; s < spans; ++s) {
    float* base = parts.data() + block * s;
    for (int32_t r = 0; r < rows.task.n_rows; ++r) rows.out[r] = base + int64_t{r} * dv;
    run_span(rows, s, base + int64_t{kMaxRows} * dv);
  }
  rows.out = outs;
  combine(rows, [&](int32_t s) { return parts.data() + block * s; });
}

}  // namespace

void attend(const LayerContext& ctx, int il, const float* q, float* out) {
  Attention(ctx, il, q, out, tensor::attention_fn()).run();
}

void attend(const LayerContext& ctx, int il, const float* q, float* out, tensor::Isa isa) {
  Attention(ctx, il, q, out, tensor::attention_fn(isa)).run();
}

}  // namespace strata::model
