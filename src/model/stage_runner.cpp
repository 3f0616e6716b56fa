#include "model/stage_runner.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <unordered_set>

#include "base/system.h"
#include "model/gated_delta_net.h"
#include "model/ops.h"
#include "tensor/decode_rates.h"
#include "tensor/repack.h"

namespace strata::model {
namespace {

// The plan's list must hold every tensor the stage reads, or a layer would run on missing weights.
Status check_tensors_listed(const Model& model, const StageConfig& config) {
  const std::unordered_set<std::string_view> listed(config.tensors.begin(), config.tensors.end());
  for (const std::string& name : tensors_needed(model, config.owned, config.input, config.output, config.mtp)) {
    if (!listed.count(name)) return make_error("stage: tensor '{}' is read by this stage but not in its tensor list", name);
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<StageRunner>> StageRunner::create(std::shared_ptr<const Model> model, const StageConfig& config) {
  const HParams& hp = model->hparams();
  STRATA_TRY(check_stage(config, hp));
  if (config.mtp && !config.output) return make_error("stage: drafting with the MTP block needs the output head");
  if (config.repack && !tensor::this_cpu_repacks()) {  // the plan counted repacked sizes for this node
    return make_error("stage: the plan repacks this node's matrices, but its kernels do not (no AVX2 within "
                      "STRATA_MAX_ISA, or STRATA_NO_REPACK set); its CPU features must reach the planner");
  }
  auto r = std::unique_ptr<StageRunner>(new StageRunner());
  r->model_ = std::move(model);
  r->config_ = config;
  STRATA_TRY(check_tensors_listed(*r->model_, config));
  STRATA_TRY(check_shard(*r->model_, config.shard));
  STRATA_ASSIGN(r->weights_, r->model_->bind(config.tensors));
  r->shard_hp_ = shard_hparams(hp, config.shard);
  r->mtp_global_ = r->weights_.global;  // the file's views, unsliced
  slice_weights(r->weights_, *r->model_, config.shard, config.owned, config.input, r->sliced_);
  r->pool_ = std::make_unique<tensor::ThreadPool>(config.n_threads);
  r->weight_bytes_ = sat_add(r->repack_weights(), mtp_head_bytes(*r->model_, config));
  const memory::KvConfig kv = kv_config(hp, r->model_->architecture(), config);
  STRATA_ASSIGN(r->kv_, memory::KvCache::create(kv));
  if (hp.has_recurrent_layers()) {
    memory::RecurrentConfig rc = recurrent_config(r->shard_hp_, config.owned, config.n_seq);
    rc.n_checkpoints = config.n_checkpoints;
    STRATA_ASSIGN(r->recurrent_, memory::RecurrentState::create(rc));
  }
  if (config.mtp) {
    // The block and its head run whole even on a tensor-split member: the model's own shapes.
    if (!config.shard.split()) r->mtp_global_ = r->weights_.global;  // repacked where the trunk's are
    const MtpHead::Parts parts{*r->model_, hp, r->weights_, r->mtp_global_, *r->pool_, r->scratch_};
    STRATA_ASSIGN(r->mtp_, MtpHead::create(parts, config));
    spdlog::info("MTP block {} loaded to draft (--spec-type draft-mtp): its KV cache {:.1f} MiB", hp.n_layer,
                 r->mtp_->kv_bytes() / 1048576.0);
  }
  return r;
}

namespace {

MatrixView* matrix_slot(Weights& w, const TensorDecl& d) {
  if (const auto* s = std::get_if<MatrixView LayerWeights::*>(&d.slot)) return &(w.layers[d.layer].*(*s));
  if (const auto* s = std::get_if<MatrixView GlobalWeights::*>(&d.slot)) return &(w.global.*(*s));
  return nullptr;
}

double process_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

// Where the time goes: faulting in the new pages most of it, then repacking (far faster than the old
// per-element loops, slower than a memcpy of the same bytes), faulting in the mapped source and
// releasing its pages. The destination asks for 2 MiB pages (aligned_buffer): they fill faster
// than 4 KiB pages, except the first time on a VM (no compaction counted: likely the hypervisor
// backing fresh memory), and decode reads them faster. The figures are in bench/README.md.
// MADV_POPULATE_WRITE / MADV_POPULATE_READ / MADV_WILLNEED gained nothing.
uint64_t StageRunner::repack_weights() {
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  const std::unordered_set<std::string_view> listed(config_.tensors.begin(), config_.tensors.end());
  uint64_t from = 0, to = 0, held = 0;  // held: what this node keeps, as it turned out
  const MatrixView* largest = nullptr;
  std::string largest_name;
  for (const Model::Tensor& t : model_->tensors()) {
    if (!listed.count(t.decl.name)) continue;
    MatrixView* view = matrix_slot(weights_, t.decl);
    if (!repacks_tensor(*t.info, config_.repack) || !view || !tensor::repackable(*view)) {
      held += shard_tensor_bytes(model_->hparams(), t.decl, *t.info, config_.shard, config_.input, false);
      continue;
    }
    const size_t n = static_cast<size_t>(view->rows) * tensor::repacked_row_bytes(view->type, view->cols);
    AlignedBuffer buf = aligned_buffer(n);
    const int64_t groups = view->rows / tensor::kRepackRows;
    const MatrixView src = *view;
    pool_->parallel_for(groups, 8, [&](int64_t g0, int64_t g1) { tensor::repack_groups(src, buf.get(), g0, g1); });
    *view = tensor::repacked_view(src, buf.get());
    if (!largest || n > largest->rows * largest->row_stride) largest = view, largest_name = t.decl.name;
    model_->release_pages(t);
    std::erase_if(sliced_, [&](const AlignedBuffer& b) { return b.get() == src.data; });  // a copied slice
    repacked_.push_back(std::move(buf));
    from += t.info->nbytes;
    to += n;
    held += n;
  }
  if (repacked_.empty()) return held;
  if (!model_->has_output_weight()) {  // the tied head reads the repacked token_embd (its shard's rows)
    const Range v = output_rows(config_.shard, model_->hparams().n_vocab);
    weights_.global.output = head_rows_only(config_.shard, config_.input) ? weights_.global.token_embd
                                                                          : weights_.global.token_embd.slice_rows(v.begin, v.size());
  }
  choose_decode_prefetch(*largest, largest_name);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("repacked {} matrices for the prompt kernels: {:.1f} MiB -> {:.1f} MiB in {:.2f} s ({} threads, {:.2f} s CPU; "
               "{:.1f} MiB of the process in 2 MiB pages)",
               repacked_.size(), from / 1048576.0, to / 1048576.0, s, pool_->size(), process_cpu_seconds() - cpu_start,
               huge_page_bytes() / 1048576.0);
  return held;
}

// Once per process, on the first matrix large enough to stream from memory (tensor/repack.h).
void StageRunner::choose_decode_prefetch(const MatrixView& w, const std::string& name) {
  static std::atomic<bool> chosen{false};
  if (chosen.load()) return;
  const tensor::PrefetchChoice c = tensor::calibrate_decode_prefetch(w, *pool_);
  if (!c.measured && !c.forced) return;  // too small to tell: a later stage may decide
  chosen = true;
  if (c.forced) {
    spdlog::info("decode prefetch {}: set by STRATA_DECODE_PREFETCH", c.on ? "on" : "off");
  } else {
    spdlog::info("decode prefetch {}: one-token products of {} read {:.1f} GB/s with software prefetch, {:.1f} without "
                 "({} threads)", c.on ? "on" : "off", name, c.gbps_with, c.gbps_without, pool_->size());
  }
}

Status StageRunner::validate(const Batch& b, bool check_tokens, bool again) const {
  const int64_t n = b.size();
  const int32_t n_seq = config_.n_seq;
  if (n == 0) return make_error("empty batch");
  if (n > config_.n_batch) return make_error("batch of {} tokens exceeds the batch size {}", n, config_.n_batch);
  if (static_cast<int64_t>(b.pos.size()) != n || static_cast<int64_t>(b.seq.size()) != n ||
      static_cast<int64_t>(b.logits.size()) != n) {
    return make_error("batch arrays differ in length");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (b.seq[i] < 0 || b.seq[i] >= n_seq) return make_error("sequence {} out of range [0, {})", b.seq[i], n_seq);
  }
  std::vector<int32_t> next(n_seq);
  for (int32_t s = 0; s < n_seq; ++s) next[s] = kv_.n_past(s);
  if (again) {
    // The batch's rows were recorded by this node's earlier hop: each sequence starts that many back.
    std::vector<int32_t> rows(n_seq, 0);
    for (int64_t i = 0; i < n; ++i) ++rows[b.seq[i]];
    for (int32_t s = 0; s < n_seq; ++s) {
      if (rows[s] > next[s]) {
        return make_error("sequence {}: a continued hop brings {} rows but this node recorded only {} positions", s,
                          rows[s], next[s]);
      }
      next[s] -= rows[s];
    }
  }
  const int32_t n_vocab = model_->hparams().n_vocab;
  for (int64_t i = 0; i < n; ++i) {
    if (check_tokens && (b.tokens[i] < 0 || b.tokens[i] >= n_vocab)) {
      return make_error("token id {} out of range [0, {})", b.tokens[i], n_vocab);
    }
    if (b.pos[i] < 0) return make_error("negative position {}", b.pos[i]);
    if (b.pos[i] != next[b.seq[i]]) {
      return make_error("sequence {} expects position {}, got {}", b.seq[i], next[b.seq[i]], b.pos[i]);
    }
    if (b.pos[i] >= config_.n_ctx_per_seq) {
      return make_error("position {} exceeds the context of {} tokens per sequence", b.pos[i], config_.n_ctx_per_seq);
    }
    ++next[b.seq[i]];
  }
  return {};
}

void StageRunner::embed(const Batch& batch, std::vector<float>& hidden) {
  const int64_t E = model_->hparams().n_embd;
  hidden.resize(batch.size() * E);
  for (int64_t t = 0; t < batch.size(); ++t) {
    tensor::dequantize_matrix_row(weights_.global.token_embd, batch.tokens[t], hidden.data() + t * E);
  }
}

Status StageRunner::run_layers(const Batch& batch, int32_t first, int32_t end, float* hidden) {
  const HParams& hp = model_->hparams();
  if (first < 0 || end > hp.n_layer || first > end) return make_error("layer range {}..{} out of range", first, end);
  for (int32_t il = first; il < end; ++il) {
    if (!config_.owned[il]) return make_error("layer {} is not owned by this node", il);
  }
  LayerContext ctx{shard_hp_, weights_.global, *pool_, batch, kv_, recurrent_ ? &*recurrent_ : nullptr, scratch_,
                   collective_};
  if (collective_) {
    warmer_.begin_batch();
    ctx.warmer = &warmer_;
  }
  if (config_.shard.split()) ctx.first_expert = config_.shard.experts.begin, ctx.end_expert = config_.shard.experts.end;
  // Its one-token products teach the plan what this node decodes at (tensor/decode_rates.h).
  const tensor::DecodingStage decoding(config_.shard.split(),
                                      batch.size() == 1 && weight_bytes_ >= tensor::kDecodeRatesMinStageBytes);
  for (int32_t il = first; il < end; ++il) model_->architecture().forward_layer(ctx, weights_.layers[il], il, hidden);
  if (collective_) STRATA_TRY(collective_->error());
  record_positions(batch);
  return {};
}

void StageRunner::set_collective(Collective* collective) {
  collective_ = collective;
  if (!collective) return;
  if (warmer_.budget() == 0) spdlog::info("tensor split: no weights are warmed while exchanges wait (STRATA_WARM_MB=0)");
  else spdlog::info("tensor split: while an exchange waits, up to {} MiB of the weights read next are pulled into the caches",
                    warmer_.budget() >> 20);
}

Result<std::vector<int32_t>> StageRunner::draft_mtp(int32_t seq, int32_t token, int32_t pos, const MtpDraftOptions& options) {
  if (!mtp_) return make_error("this stage does not draft with the MTP block");
  if (seq < 0 || seq >= config_.n_seq) return make_error("sequence {} out of range", seq);
  if (token < 0 || token >= model_->hparams().n_vocab) return make_error("token id {} out of range", token);
  if (pos != kv_.n_past(seq)) return make_error("sequence {}: a draft from position {}, but it holds {}", seq, pos, kv_.n_past(seq));
  return mtp_->draft(seq, token, pos, options);
}

void StageRunner::record_positions(const Batch& batch) {
  for (int64_t t = 0; t < batch.size(); ++t) {
    kv_.set_n_past(batch.seq[t], batch.pos[t] + 1);
    if (recurrent_) recurrent_->set_n_past(batch.seq[t], batch.pos[t] + 1);
  }
}

std::vector<float> StageRunner::logits(const Batch& batch, const float* hidden) {
  const HParams& hp = model_->hparams();
  const int64_t E = hp.n_embd;
  std::vector<float> rows;
  if (mtp_) {  // the block reads every row's normed state, the head only the flagged ones
    normed_.resize(static_cast<size_t>(batch.size() * E));
    rms_norm_rows(hidden, normed_.data(), batch.size(), E, hp.rms_eps, weights_.global.output_norm.data);
    mtp_->process(batch, normed_.data());
  }
  for (int64_t t = 0; t < batch.size(); ++t) {
    if (!batch.logits[t]) continue;
    rows.resize(rows.size() + E);
    if (mtp_) {
      std::copy_n(normed_.data() + t * E, E, rows.data() + rows.size() - E);
    } else {
      rms_norm(hidden + t * E, rows.data() + rows.size() - E, E, hp.rms_eps, weights_.global.output_norm.data);
    }
  }
  const int64_t n_out = static_cast<int64_t>(rows.size()) / E;
  std::vector<float> out(n_out * weights_.global.output.rows);
  if (n_out > 0) {
    const MatrixView& head = weights_.global.output;
    if (collective_) warmer_.note(head.data, static_cast<size_t>(head.rows) * head.row_stride);
    const tensor::DecodingStage decoding(config_.shard.split(), n_out == 1 && weight_bytes_ >= tensor::kDecodeRatesMinStageBytes);
    tensor::matmul(head, rows.data(), n_out, out.data(), *pool_);
    add_bias_rows(out.data(), n_out, weights_.global.output_bias);
  }
  return out;
}

Status StageRunner::clear_seq(int32_t seq) {
  if (seq < 0 || seq >= config_.n_seq) return make_error("sequence {} out of range", seq);
  kv_.clear(seq);
  if (recurrent_) STRATA_TRY(recurrent_->clear(seq));
  if (mtp_) mtp_->clear(seq);
  return {};
}

Status StageRunner::remove_from(int32_t seq, int32_t p0) {
  if (recurrent_) STRATA_TRY(recurrent_->remove_from(seq, p0));
  STRATA_TRY(kv_.remove_from(seq, p0));
  if (mtp_) mtp_->remove_from(seq, p0);
  return {};
}

Status StageRunner::save_checkpoint(int32_t seq, int32_t pos) {
  if (seq < 0 || seq >= config_.n_seq) return make_error("sequence {} out of range", seq);
  if (pos != kv_.n_past(seq)) {
    return make_error("sequence {}: a checkpoint at position {} asked for, but the sequence holds {}", seq, pos, kv_.n_past(seq));
  }
  return recurrent_ ? recurrent_->save_checkpoint(seq) : Status{};
}

Status StageRunner::restore_checkpoint(int32_t seq, int32_t pos) {
  if (seq < 0 || seq >= config_.n_seq) return make_error("sequence {} out of range", seq);
  if (pos < 0 || pos > kv_.n_past(seq)) {
    return make_error("sequence {}: cannot restore position {} (the sequence holds {})", seq, pos, kv_.n_past(seq));
  }
  if (recurrent_) STRATA_TRY(recurrent_->restore_checkpoint(seq, pos));
  STRATA_TRY(kv_.remove_from(seq, pos));
  if (mtp_) mtp_->remove_from(seq, pos);
  return {};
}

Status StageRunner::drop_checkpoint(int32_t seq, int32_t pos) {
  if (seq < 0 || seq >= config_.n_seq) return make_error("sequence {} out of range", seq);
  return recurrent_ ? recurrent_->drop_checkpoint(seq, pos) : Status{};
}

Status StageRunner::stash_seq(int32_t seq, int32_t id) {
  if (seq < 0 || seq >= config_.n_seq) return make_error("sequence {} out of range", seq);
  if (id < 0 || stashes_.count(id)) return make_error("stash {}: the id is negative or taken", id);
  const int32_t n_checkpoints = recurrent_ ? static_cast<int32_t>(recurrent_->checkpoint_positions(seq).size()) : 0;
  const uint64_t need = stash_bytes(model_->hparams(), model_->architecture(), config_, kv_.n_past(seq), n_checkpoints);
  if (sat_add(stashed_bytes_, need) > config_.cache_ram_bytes) {
    return make_error(ErrorCode::kResourceExhausted, "stash of sequence {}: {} bytes more would pass --cache-ram ({} of {} used)",
                      seq, need, stashed_bytes_, config_.cache_ram_bytes);
  }
  Stash s;
  STRATA_ASSIGN(s.blob.kv, kv_.save_rows(seq));
  if (recurrent_) {
    STRATA_ASSIGN(s.blob.state, recurrent_->save_seq(seq));
  }
  return add_stash(id, std::move(s));
}

Status StageRunner::add_stash(int32_t id, Stash s) {
  s.bytes = s.blob.kv.bytes() + (s.blob.state ? s.blob.state->bytes() : 0);
  stashed_bytes_ += s.bytes;
  stashes_.emplace(id, std::move(s));
  return {};
}

Status StageRunner::unstash_seq(int32_t id, int32_t seq) {
  if (seq < 0 || seq >= config_.n_seq) return make_error("sequence {} out of range", seq);
  auto it = stashes_.find(id);
  if (it == stashes_.end()) return make_error(ErrorCode::kNotFound, "no stash {} on this node", id);
  const memory::SeqBlob& blob = it->second.blob;
  if (blob.state.has_value() != recurrent_.has_value()) return make_error("stash {} does not match this stage", id);
  if (blob.state) STRATA_TRY(recurrent_->load_seq(seq, *blob.state));
  STRATA_TRY(kv_.load_rows(seq, blob.kv));
  if (mtp_) mtp_->clear(seq);  // the host cache keeps no MTP rows: its drafts start over (process)
  return drop_stash(id);
}

Result<std::vector<uint8_t>> StageRunner::export_stash(int32_t id) const {
  auto it = stashes_.find(id);
  if (it == stashes_.end()) return make_error(ErrorCode::kNotFound, "no stash {} on this node", id);
  return memory::encode_seq(it->second.blob);
}

Status StageRunner::import_stash(int32_t id, std::span<const uint8_t> bytes) {
  if (id < 0 || stashes_.count(id)) return make_error("stash {}: the id is negative or taken", id);
  if (sat_add(stashed_bytes_, bytes.size()) > config_.cache_ram_bytes) {
    return make_error(ErrorCode::kResourceExhausted, "a saved sequence of {} bytes would pass --cache-ram ({} of {} used)",
                      bytes.size(), stashed_bytes_, config_.cache_ram_bytes);
  }
  Stash s;
  STRATA_ASSIGN(s.blob, memory::decode_seq(bytes));
  STRATA_TRY(kv_.fits(s.blob.kv));
  if (s.blob.state.has_value() != recurrent_.has_value()) {
    return make_error("the saved sequence {} recurrent state, this stage {}", s.blob.state ? "has" : "has no",
                      recurrent_ ? "keeps one" : "keeps none");
  }
  if (s.blob.state) STRATA_TRY(recurrent_->fits(*s.blob.state));
  return add_stash(id, std::move(s));
}

Status StageRunner::drop_stash(int32_t id) {
  for (auto it = stashes_.begin(); it != stashes_.end();) {
    if (id >= 0 && it->first != id) {
      ++it;
      continue;
    }
    stashed_bytes_ -= it->second.bytes;
    it = stashes_.erase(it);
  }
  return {};
}

Status StageRunner::copy_seq(int32_t src, int32_t dst) {
  if (recurrent_) STRATA_TRY(recurrent_->copy(src, dst));
  STRATA_TRY(kv_.copy(src, dst));
  if (mtp_) mtp_->copy(src, dst);
  return {};
}

}  // namespace strata::model
