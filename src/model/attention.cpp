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

struct TokenBlock {
  int32_t first;  // into the seq-sorted token order
  int32_t count;
};

// Q meets the keys in the format llama.cpp's flash attention converts it to for their type (its
// vec_dot_type): F16 for F16 keys, Q8_0 for Q8_0 and Q4_0 keys. Here it is rounded through that
// format and back, so the kernel's F32 dot sees the values llama.cpp's dot sees.
void round_query(DType k_type, const float* q, float* out, int32_t dk, std::vector<uint8_t>& q8) {
  if (k_type == DType::F16) {
    for (int32_t d = 0; d < dk; ++d) out[d] = fp16_to_fp32(fp32_to_fp16(q[d]));
    return;
  }
  q8.resize(row_bytes(DType::Q8_0, dk));
  tensor::quantize_activations(DType::Q8_0, q, q8.data(), dk);
  tensor::dequantize_row(DType::Q8_0, q8.data(), out, dk);
}

void attend_with(const LayerContext& ctx, int il, const float* q_all, float* out, tensor::AttentionFn kernel) {
  const HParams& hp = ctx.hp;
  const memory::KvCache& kv = ctx.kv;
  const Batch& batch = ctx.batch;
  const int32_t T = static_cast<int32_t>(batch.size());
  const int32_t dk = hp.head_dim_k, dv = hp.head_dim_v;
  const int32_t group = hp.n_head / hp.n_head_kv;
  const int32_t heads_per_item = std::min(group, kMaxRows);
  const int32_t head_chunks = (group + heads_per_item - 1) / heads_per_item;
  const int32_t tokens_per_item = std::clamp(kMaxRows / heads_per_item, 1, kMaxTokens);

  // Tokens by sequence (batch order within one), cut into blocks that share K/V tiles.
  std::vector<int32_t> order(T);
  for (int32_t t = 0; t < T; ++t) order[t] = t;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return batch.seq[a] < batch.seq[b]; });
  std::vector<TokenBlock> blocks;
  for (int32_t i = 0; i < T;) {
    int32_t e = i + 1;
    while (e < T && e - i < tokens_per_item && batch.seq[order[e]] == batch.seq[order[i]]) ++e;
    blocks.push_back({i, e - i});
    i = e;
  }

  const int64_t per_block = int64_t{hp.n_head_kv} * head_chunks;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  ctx.pool.parallel_for(static_cast<int64_t>(blocks.size()) * per_block, 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> q16;
    thread_local std::vector<uint8_t> q8;
    thread_local std::vector<const float*> q_rows;
    thread_local std::vector<float*> out_rows;
    thread_local std::vector<int32_t> n_kv;
    for (int64_t item = i0; item < i1; ++item) {
      const TokenBlock& b = blocks[item / per_block];
      const int32_t hk = static_cast<int32_t>(item % per_block / head_chunks);
      const int32_t h0 = hk * group + static_cast<int32_t>(item % head_chunks) * heads_per_item;
      const int32_t nh = std::min(heads_per_item, (hk + 1) * group - h0);
      const int32_t rows = b.count * nh;
      q16.resize(int64_t{rows} * dk);
      q_rows.resize(rows);
      out_rows.resize(rows);
      n_kv.resize(rows);
      for (int32_t j = 0; j < b.count; ++j) {
        const int32_t t = order[b.first + j];
        for (int32_t h = 0; h < nh; ++h) {
          const int32_t r = j * nh + h;
          const float* q = q_all + (int64_t{t} * hp.n_head + h0 + h) * dk;
          float* qr = q16.data() + int64_t{r} * dk;
          round_query(kv.config().type_k, q, qr, dk, q8);
          q_rows[r] = qr;
          out_rows[r] = out + (int64_t{t} * hp.n_head + h0 + h) * dv;
          n_kv[r] = batch.pos[t] + 1;
        }
      }
      const int32_t seq = batch.seq[order[b.first]];
      tensor::AttentionTask task;
      task.n_rows = rows;
      task.q = q_rows.data();
      task.out = out_rows.data();
      task.n_kv = n_kv.data();
      task.k = kv.k(il, seq, 0) + row_bytes(kv.config().type_k, int64_t{hk} * dk);
      task.v = kv.v(il, seq, 0) + row_bytes(kv.config().type_v, int64_t{hk} * dv);
      task.k_stride_bytes = static_cast<int64_t>(kv.k_row_bytes());
      task.v_stride_bytes = static_cast<int64_t>(kv.v_row_bytes());
      task.k_type = kv.config().type_k;
      task.v_type = kv.config().type_v;
      task.dk = dk;
      task.dv = dv;
      task.scale = scale;
      kernel(task);
    }
  });
}

}  // namespace

void attend(const LayerContext& ctx, int il, const float* q, float* out) {
  attend_with(ctx, il, q, out, tensor::attention_fn());
}

void attend(const LayerContext& ctx, int il, const float* q, float* out, tensor::Isa isa) {
  attend_with(ctx, il, q, out, tensor::attention_fn(isa));
}

}  // namespace strata::model
