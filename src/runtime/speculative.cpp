#include "runtime/speculative.h"

#include <algorithm>
#include <utility>

namespace strata::runtime {

void SpecStats::add_check(int64_t drafted_tokens, int32_t kept) {
  verifies += 1;
  drafted += drafted_tokens;
  accepted += kept;
  if (accepted_at.size() < static_cast<size_t>(kept)) accepted_at.resize(static_cast<size_t>(kept));
  for (int32_t i = 0; i < kept; ++i) ++accepted_at[static_cast<size_t>(i)];
}

Result<SpecType> parse_spec_type(std::string_view name) {
  if (name == "none") return SpecType::kNone;
  if (name == "ngram-simple") return SpecType::kNgramSimple;
  if (name == "draft-mtp") return SpecType::kDraftMtp;
  for (std::string_view known : {"draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark",
                                 "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"}) {
    if (name == known) {
      return make_error(ErrorCode::kInvalidArgument, "--spec-type {}: llama.cpp's name, not built in Strata yet; use "
                        "draft-mtp, ngram-simple or none", name);
    }
  }
  return make_error(ErrorCode::kInvalidArgument, "--spec-type {}: unknown (Strata has none, ngram-simple and draft-mtp)", name);
}

std::string_view spec_type_name(SpecType type) {
  switch (type) {
    case SpecType::kNone: return "none";
    case SpecType::kNgramSimple: return "ngram-simple";
    case SpecType::kDraftMtp: return "draft-mtp";
  }
  return "none";
}

Status validate(const SpecParams& p) {
  constexpr int32_t kMaxDraft = 256;  // the check is one batch: drafts beyond this only cost
  if (p.n_max < 1 || p.n_max > kMaxDraft) return make_error("--spec-draft-n-max {}: must be 1..{}", p.n_max, kMaxDraft);
  if (p.n_min < 0 || p.n_min > p.n_max) return make_error("--spec-draft-n-min {}: must be 0..{} (--spec-draft-n-max)", p.n_min, p.n_max);
  if (!(p.p_min >= 0.0f && p.p_min <= 1.0f)) return make_error("--spec-draft-p-min {}: must be in [0, 1]", p.p_min);
  if (p.ngram_n < 1 || p.ngram_n > 1024) return make_error("--spec-ngram-simple-size-n {}: must be 1..1024", p.ngram_n);
  if (p.ngram_m < 1 || p.ngram_m > kMaxDraft) {
    return make_error("--spec-ngram-simple-size-m {}: must be 1..{}", p.ngram_m, kMaxDraft);
  }
  if (p.ngram_min_hits < 1) return make_error("--spec-ngram-simple-min-hits {}: must be at least 1", p.ngram_min_hits);
  return {};
}

std::vector<text::Token> ngram_draft(std::span<const text::Token> history, int32_t n, int32_t m, int32_t min_hits) {
  const size_t L = history.size(), N = static_cast<size_t>(n);
  if (n < 1 || m < 1 || L <= N) return {};
  const auto key = history.subspan(L - N);
  size_t newest = 0;
  int32_t hits = 0;
  // Newest first: the latest occurrence is the likeliest to go on the same way.
  for (size_t j = L - N; j-- > 0;) {
    if (history[j + N - 1] != key.back() || !std::equal(key.begin(), key.end(), history.begin() + static_cast<ptrdiff_t>(j))) continue;
    if (hits++ == 0) newest = j;
    if (hits >= min_hits) break;
  }
  if (hits < min_hits) return {};
  const size_t from = newest + N, to = std::min(L, from + static_cast<size_t>(m));
  return {history.begin() + static_cast<ptrdiff_t>(from), history.begin() + static_cast<ptrdiff_t>(to)};
}

Result<std::vector<text::Token>> Speculation::draft(Engine& engine, const Generation& gen) const {
  const int32_t room = gen.draft_room();
  if (!params_.enabled() || room <= 0) return std::vector<text::Token>{};
  std::vector<text::Token> out;
  if (params_.type == SpecType::kDraftMtp) {
    const model::MtpDraftOptions options{.n_max = std::min(params_.n_max, room), .p_min = params_.p_min};
    STRATA_ASSIGN(out, engine.draft_mtp(gen.seq(), gen.waiting(), gen.n_past(), options));
  } else {
    out = ngram_draft(gen.history(), params_.ngram_n, std::min(params_.ngram_m, room), params_.ngram_min_hits);
  }
  if (static_cast<int32_t>(out.size()) < std::max(1, params_.n_min)) out.clear();
  return out;
}

Status Speculation::feed(Engine& engine, Generation& gen, std::span<const text::Token> draft, model::Batch& batch) {
  checkpointed_ = false;
  first_ = gen.n_past();
  if (engine.needs_checkpoints()) {
    STRATA_TRY(engine.save_checkpoint(gen.seq(), first_));
    checkpointed_ = true;
  }
  const auto before = static_cast<ptrdiff_t>(batch.tokens.size());
  if (!gen.feed_draft(batch, draft).wants_logits) {
    return make_error("speculation: a draft of {} tokens does not fit the sequence", draft.size());
  }
  fed_.assign(batch.tokens.begin() + before, batch.tokens.end());
  drafted_ = static_cast<int64_t>(draft.size());
  return {};
}

Result<Generation::DraftResult> Speculation::accept(Engine& engine, Generation& gen, std::span<const float> rows) {
  Generation::DraftResult result = gen.accept_draft(rows);
  stats_.add_check(drafted_, result.accepted);
  STRATA_TRY(cut_back(engine, gen.seq(), gen.n_past()));
  return result;
}

// The check put fed_ at first_..; the generation keeps positions up to `kept`.
Status Speculation::cut_back(Engine& engine, int32_t seq, int32_t kept) {
  const int32_t end = first_ + static_cast<int32_t>(fed_.size());
  const bool checkpointed = std::exchange(checkpointed_, false);
  if (kept < end && !checkpointed) STRATA_TRY(engine.remove_from(seq, kept));
  if (kept < end && checkpointed) {
    // The recurrent state saw the refused tokens too: back to before the check, then the kept ones again.
    STRATA_TRY(engine.restore_checkpoint(seq, first_));
    model::Batch again;
    for (int32_t p = first_; p < kept; ++p) again.add(fed_[static_cast<size_t>(p - first_)], p, seq, false);
    if (again.size() > 0) STRATA_TRY(engine.decode(again));
  }
  if (checkpointed) STRATA_TRY(engine.drop_checkpoint(seq, first_));
  return {};
}

}  // namespace strata::runtime
