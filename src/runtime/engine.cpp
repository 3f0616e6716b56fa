#include "runtime/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "model/ops.h"

namespace strata::runtime {

Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  auto e = std::unique_ptr<Engine>(new Engine());
  STRATA_ASSIGN(e->model_, model::Model::open(options.model_path));
  STRATA_ASSIGN(e->vocab_, text::Vocab::load(e->model_->file()));
  const model::HParams& hp = e->model_->hparams();
  if (e->vocab_->n_tokens() != hp.n_vocab) {
    return make_error("{}: tokenizer has {} tokens but token_embd has {} rows", options.model_path,
                      e->vocab_->n_tokens(), hp.n_vocab);
  }
  if (options.n_seq < 1 || options.n_seq > 256) return make_error("number of sequences {} out of range 1..256", options.n_seq);
  if (options.n_batch < 1) return make_error("batch size {} must be positive", options.n_batch);
  int32_t n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min<int32_t>(4096, hp.n_ctx_train);
  if (options.n_ctx < 0) return make_error("context size {} is negative", options.n_ctx);
  if (n_ctx < options.n_seq) return make_error("context {} is smaller than the number of sequences {}", n_ctx, options.n_seq);
  if (n_ctx > hp.n_ctx_train) {
    spdlog::warn("context {} exceeds the model's training context {}", n_ctx, hp.n_ctx_train);
  }
  const int32_t n_threads = options.n_threads > 0 ? options.n_threads
                                                  : std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
  e->n_batch_ = options.n_batch;

  plan::Request request{n_ctx, options.n_seq, options.n_batch};
  STRATA_ASSIGN(e->plan_, plan::make_plan(*e->model_, {plan::local_node(n_threads)}, request));
  for (const std::string& note : e->plan_.decisions) spdlog::info("plan: {}", note);

  const std::vector<uint8_t> owned = e->plan_.owned_by(0);
  STRATA_ASSIGN(e->weights_, e->model_->bind(owned));
  memory::KvConfig kv;
  kv.n_layer = hp.n_layer;
  kv.layer_has_kv = owned;
  kv.n_embd_k = hp.n_embd_k_gqa();
  kv.n_embd_v = hp.n_embd_v_gqa();
  kv.n_seq = options.n_seq;
  kv.n_ctx_per_seq = n_ctx / options.n_seq;
  STRATA_ASSIGN(e->kv_, memory::KvCache::create(kv));
  e->pool_ = std::make_unique<tensor::ThreadPool>(n_threads);
  spdlog::info("loaded {} ({}, {} layers, {} params), context {} x {} seq, {} threads", hp.name, hp.arch, hp.n_layer,
               e->model_->n_params(), kv.n_ctx_per_seq, kv.n_seq, n_threads);
  return e;
}

Status Engine::validate(const model::Batch& b) const {
  const int64_t n = b.size();
  if (n == 0) return make_error("decode: empty batch");
  if (n > n_batch_) return make_error("decode: batch of {} tokens exceeds the batch size {}", n, n_batch_);
  if (static_cast<int64_t>(b.pos.size()) != n || static_cast<int64_t>(b.seq.size()) != n ||
      static_cast<int64_t>(b.logits.size()) != n) {
    return make_error("decode: batch arrays differ in length");
  }
  std::vector<int32_t> next(n_seq());
  for (int32_t s = 0; s < n_seq(); ++s) next[s] = kv_.n_past(s);
  for (int64_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= n_vocab()) return make_error("decode: token id {} out of range [0, {})", b.tokens[i], n_vocab());
    if (b.seq[i] < 0 || b.seq[i] >= n_seq()) return make_error("decode: sequence {} out of range [0, {})", b.seq[i], n_seq());
    if (b.pos[i] != next[b.seq[i]]) {
      return make_error("decode: sequence {} expects position {}, got {}", b.seq[i], next[b.seq[i]], b.pos[i]);
    }
    if (b.pos[i] >= n_ctx_per_seq()) {
      return make_error("decode: position {} exceeds the context of {} tokens per sequence", b.pos[i], n_ctx_per_seq());
    }
    ++next[b.seq[i]];
  }
  return {};
}

Result<std::vector<float>> Engine::decode(const model::Batch& batch) {
  STRATA_TRY(validate(batch));
  const model::HParams& hp = hparams();
  const int64_t T = batch.size();
  const int64_t E = hp.n_embd;
  hidden_.resize(T * E);
  for (int64_t t = 0; t < T; ++t) {
    tensor::dequantize_matrix_row(weights_.global.token_embd, batch.tokens[t], hidden_.data() + t * E);
  }
  model::LayerContext ctx{hp, weights_.global, *pool_, batch, kv_, scratch_};
  for (const plan::Stage& stage : plan_.stages) {
    for (int32_t il = stage.first_layer; il < stage.end_layer; ++il) {
      model_->architecture().forward_layer(ctx, weights_.layers[il], il, hidden_.data());
    }
  }
  for (int64_t t = 0; t < T; ++t) kv_.set_n_past(batch.seq[t], batch.pos[t] + 1);

  // Output head on the rows that want logits only.
  std::vector<float> rows;
  for (int64_t t = 0; t < T; ++t) {
    if (!batch.logits[t]) continue;
    rows.resize(rows.size() + E);
    model::rms_norm(hidden_.data() + t * E, rows.data() + rows.size() - E, E, hp.rms_eps,
                    weights_.global.output_norm.data);
  }
  const int64_t n_out = static_cast<int64_t>(rows.size()) / E;
  std::vector<float> logits(n_out * hp.n_vocab);
  if (n_out > 0) {
    tensor::matmul(weights_.global.output, rows.data(), n_out, logits.data(), *pool_);
    model::add_bias_rows(logits.data(), n_out, weights_.global.output_bias);
  }
  return logits;
}

Status Engine::clear_seq(int32_t seq) {
  if (seq < 0 || seq >= n_seq()) return make_error("sequence {} out of range", seq);
  kv_.clear(seq);
  return {};
}

Status Engine::remove_from(int32_t seq, int32_t p0) { return kv_.remove_from(seq, p0); }

Status Engine::copy_seq(int32_t src, int32_t dst) { return kv_.copy(src, dst); }

}  // namespace strata::runtime
