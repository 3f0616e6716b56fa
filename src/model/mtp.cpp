#include "model/mtp.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/ops.h"

namespace strata::model {
namespace {

constexpr int kDraftTopK = 10;  // llama.cpp's draft sampler keeps the 10 best and takes the first

// The most likely token and its probability among the k best logits (softmax over those k).
std::pair<int32_t, float> best_of_top_k(const std::vector<float>& logits, int k) {
  const int n = static_cast<int>(logits.size());
  k = std::min(k, n);
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const float top = logits[idx[0]];
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += std::exp(static_cast<double>(logits[idx[i]] - top));
  return {idx[0], static_cast<float>(1.0 / sum)};
}

}  // namespace

Result<std::unique_ptr<MtpHead>> MtpHead::create(const Parts& parts, const StageConfig& config) {
  STRATA_TRY(parts.model.mtp_available());
  auto head = std::unique_ptr<MtpHead>(new MtpHead(parts, parts.hp.n_layer));
  STRATA_ASSIGN(head->kv_, memory::KvCache::create(mtp_kv_config(parts.hp, parts.model.architecture(), config)));
  head->seqs_.resize(static_cast<size_t>(config.n_seq));
  const size_t E = static_cast<size_t>(parts.hp.n_embd);
  for (SeqHidden& s : head->seqs_) s.pending.assign(E, 0.0f);
  return head;
}

void MtpHead::run(const Batch& batch, const float* h_in, std::vector<float>& out) {
  const HParams& hp = parts_.hp;
  const GlobalWeights& g = parts_.global;
  const LayerWeights& lw = parts_.weights.layers[static_cast<size_t>(il_)];
  const int64_t E = hp.n_embd, n = batch.size();
  const MatrixView& embed = lw.nextn_embed_tokens.data ? lw.nextn_embed_tokens : g.token_embd;
  // [enorm(embedding) | hnorm(hidden)] -> eh_proj
  cat_.resize(static_cast<size_t>(n * 2 * E));
  std::vector<float> row(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    tensor::dequantize_matrix_row(embed, batch.tokens[t], row.data());
    rms_norm(row.data(), cat_.data() + t * 2 * E, E, hp.rms_eps, lw.nextn_enorm.data);
    rms_norm(h_in + t * E, cat_.data() + t * 2 * E + E, E, hp.rms_eps, lw.nextn_hnorm.data);
  }
  x_.resize(static_cast<size_t>(n * E));
  tensor::matmul(lw.nextn_eh_proj, cat_.data(), n, x_.data(), parts_.pool);
  LayerContext ctx{hp, g, parts_.pool, batch, kv_, nullptr, parts_.scratch};
  parts_.model.architecture().forward_layer(ctx, lw, il_, x_.data());
  for (int64_t t = 0; t < n; ++t) kv_.set_n_past(batch.seq[t], batch.pos[t] + 1);
  const VectorView& norm = lw.nextn_shared_head_norm.data ? lw.nextn_shared_head_norm : g.output_norm;
  out.resize(static_cast<size_t>(n * E));
  rms_norm_rows(x_.data(), out.data(), n, E, hp.rms_eps, norm.data);
}

void MtpHead::head_logits(const float* normed, std::vector<float>& logits) {
  const LayerWeights& lw = parts_.weights.layers[static_cast<size_t>(il_)];
  const MatrixView& head = lw.nextn_shared_head_head.data ? lw.nextn_shared_head_head : parts_.global.output;
  logits.resize(static_cast<size_t>(head.rows));
  tensor::matmul(head, normed, 1, logits.data(), parts_.pool);
  if (!lw.nextn_shared_head_head.data) add_bias_rows(logits.data(), 1, parts_.global.output_bias);
}

void MtpHead::process(const Batch& batch, const float* normed) {
  const int64_t E = parts_.hp.n_embd, n = batch.size();
  // Row t reads the hidden state of the position before it: the previous row of its sequence in this
  // batch, or what the sequence ended with.
  in_.resize(static_cast<size_t>(n * E));
  std::vector<int64_t> last(seqs_.size(), -1);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t s = batch.seq[t];
    if (last[s] < 0 && batch.pos[t] != kv_.n_past(s)) {
      // The trunk's sequence came back from the host cache without the block's rows: the block
      // goes on from here with what its cache holds (drafts may be refused more often, never wrong).
      kv_.set_n_past(s, batch.pos[t]);
      std::fill(seqs_[s].pending.begin(), seqs_[s].pending.end(), 0.0f);
    }
    const float* h = last[s] >= 0 ? normed + last[s] * E : seqs_[s].pending.data();
    std::copy(h, h + E, in_.begin() + t * E);
    last[s] = t;
  }
  run(batch, in_.data(), out_);
  for (size_t s = 0; s < seqs_.size(); ++s) {
    if (last[s] < 0) continue;
    SeqHidden& sh = seqs_[s];
    sh.before = sh.pending;
    sh.rows.clear();
    bool first = true;
    for (int64_t t = 0; t < n; ++t) {
      if (batch.seq[t] != static_cast<int32_t>(s)) continue;
      if (first) sh.first = batch.pos[t], first = false;
      sh.rows.insert(sh.rows.end(), normed + t * E, normed + (t + 1) * E);
    }
    sh.pending.assign(normed + last[s] * E, normed + (last[s] + 1) * E);
  }
}

std::vector<int32_t> MtpHead::draft(int32_t seq, int32_t token, int32_t pos, const MtpDraftOptions& options) {
  std::vector<int32_t> drafted;
  if (seq < 0 || seq >= static_cast<int32_t>(seqs_.size()) || pos != kv_.n_past(seq)) return drafted;
  const int32_t n_ctx = kv_.config().n_ctx_per_seq;
  std::vector<float> h = seqs_[seq].pending;
  Batch one;
  for (int32_t i = 0; i < options.n_max && pos + i < n_ctx; ++i) {
    one.clear();
    one.add(i == 0 ? token : drafted.back(), pos + i, seq, true);
    run(one, h.data(), out_);
    head_logits(out_.data(), logits_);
    const auto [best, p] = best_of_top_k(logits_, kDraftTopK);
    if (p < options.p_min) break;
    drafted.push_back(best);
    h = out_;
  }
  (void)kv_.remove_from(seq, pos);
  return drafted;
}

void MtpHead::clear(int32_t seq) {
  if (seq < 0 || seq >= static_cast<int32_t>(seqs_.size())) return;
  kv_.clear(seq);
  SeqHidden& s = seqs_[seq];
  std::fill(s.pending.begin(), s.pending.end(), 0.0f);
  s.rows.clear();
}

void MtpHead::remove_from(int32_t seq, int32_t p0) {
  if (seq < 0 || seq >= static_cast<int32_t>(seqs_.size()) || p0 >= kv_.n_past(seq)) return;
  if (p0 <= 0) return clear(seq);
  (void)kv_.remove_from(seq, p0);
  SeqHidden& s = seqs_[seq];
  const size_t E = static_cast<size_t>(parts_.hp.n_embd);
  const int64_t in_batch = p0 - s.first;  // rows of the last batch kept
  if (in_batch > 0 && static_cast<size_t>(in_batch) * E <= s.rows.size()) {
    s.pending.assign(s.rows.begin() + (in_batch - 1) * E, s.rows.begin() + in_batch * E);
  } else if (in_batch == 0 && !s.before.empty()) {
    s.pending = s.before;
  } else {
    // Cut back before the last batch: the hidden state there is gone; the next rows read zeros,
    // which only makes the first drafts after it less likely to be accepted.
    std::fill(s.pending.begin(), s.pending.end(), 0.0f);
  }
  s.rows.clear();
}

void MtpHead::copy(int32_t src, int32_t dst) {
  const int32_t n = static_cast<int32_t>(seqs_.size());
  if (src < 0 || src >= n || dst < 0 || dst >= n || src == dst) return;
  (void)kv_.copy(src, dst);
  seqs_[dst] = seqs_[src];
}

}  // namespace strata::model
