#include "runtime/generation.h"

#include <algorithm>
#include <cmath>

#include "runtime/prompt_chunks.h"

namespace strata::runtime {

Generation::Generation(const GenerationParams& params, int32_t seq, const GenerationModel& model)
    : Generation(params, seq, model, sampling::Sampler(params.sampling, model.n_vocab)) {}

Generation::Generation(GenerationParams params, int32_t seq, const GenerationModel& model, sampling::Sampler sampler)
    : params_(std::move(params)), seq_(seq), model_(model), sampler_(std::move(sampler)),
      budget_(params_.reasoning_budget) {
  // Penalties count the prompt's tokens too.
  for (text::Token t : params_.prompt) sampler_.accept(t);
  if (params_.grammar) {
    matcher_.emplace(params_.grammar, *model_.vocab);
    if (params_.ignore_eos) {
      for (text::Token t = 0; t < model_.vocab->n_tokens(); ++t) {
        if (model_.vocab->is_eog(t)) eog_tokens_.push_back(t);
      }
    }
  }
}

int32_t Generation::candidates_needed() const {
  if (params_.top_logprobs >= 0 || matcher_) return 0;
  return sampling::candidates_needed(sampler_.params(), model_.n_vocab);
}

Feed Generation::feed(model::Batch& batch, int32_t budget) {
  Feed out;
  if (done_ || batch.size() >= budget) return out;
  save_feed_state();
  if (replaying()) {  // the cache's tokens again, after a recovery emptied it; no logits wanted
    const int32_t take = static_cast<int32_t>(std::min<int64_t>(budget - batch.size(), static_cast<int64_t>(replay_.size()) - n_past_));
    for (int32_t i = 0; i < take; ++i) batch.add(replay_[n_past_ + i], n_past_ + i, seq_, false);
    n_past_ += take;
    out.prompt_rows = take;
    return out;
  }
  if (next_ >= 0) {
    batch.add(next_, n_past_++, seq_, true);
    fed_generated_.push_back(next_);
    next_ = -1;
    out.wants_logits = true;
    return out;
  }
  size_t room = static_cast<size_t>(budget - batch.size());
  for (int32_t b : breaks_) {
    if (static_cast<size_t>(b) > prompt_done_) {
      room = std::min(room, static_cast<size_t>(b) - prompt_done_);
      break;
    }
  }
  const size_t take = add_prompt_chunk(batch, params_.prompt, prompt_done_, room, {seq_, 0, false});
  out.wants_logits = take > 0 && prompt_done_ + take == params_.prompt.size();
  prompt_done_ += take;
  n_past_ += static_cast<int32_t>(take);
  out.prompt_rows = static_cast<int32_t>(take);
  return out;
}

void Generation::replay_after_failure(bool last_feed_failed) {
  if (last_feed_failed && before_feed_.valid) {
    fed_generated_.resize(std::min(fed_generated_.size(), before_feed_.fed_generated));
    draft_.clear();
    prompt_done_ = before_feed_.prompt_done;
    n_past_ = before_feed_.n_past;
    next_ = before_feed_.next;
  }
  before_feed_.valid = false;
  if (!replaying()) replay_ = tokens_in_cache();  // else a replay failed: the same tokens again
  n_past_ = 0;
  if (!replay_.empty()) ++replays_;
}

void Generation::resume_from(int32_t n) {
  if (prompt_done_ > 0 || n < 0 || static_cast<size_t>(n) >= params_.prompt.size()) return;
  prompt_done_ = static_cast<size_t>(n);
  n_past_ = n;
}

void Generation::set_prompt_breaks(std::vector<int32_t> positions) {
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  breaks_ = std::move(positions);
}

std::vector<text::Token> Generation::tokens_in_cache() const {
  std::vector<text::Token> out(params_.prompt.begin(), params_.prompt.begin() + static_cast<ptrdiff_t>(prompt_done_));
  if (prompt_done_ == params_.prompt.size()) out.insert(out.end(), fed_generated_.begin(), fed_generated_.end());
  out.resize(std::min(out.size(), static_cast<size_t>(n_past_)));  // a replay holds only its fed part
  return out;
}

GenerationStep Generation::next_token(std::span<const float> logits) {
  GenerationStep step;
  const text::Vocab& vocab = *model_.vocab;
  step.token = choose(logits);
  if (step.token < 0) {  // the grammar allows no token of this vocabulary
    step.token = vocab.eos();
    step.end_of_generation = true;
    return finish(step, "stop");
  }
  sampler_.accept(step.token);
  ++n_generated_;
  if (params_.top_logprobs >= 0) step.logprobs.push_back(logprob_of(step.token, logits));
  if (!params_.ignore_eos && vocab.is_eog(step.token)) {
    step.end_of_generation = true;
    return finish(step, "stop");
  }
  if (matcher_ && !matcher_->accept(step.token).ok()) {  // sample_with_grammar checked it: not reached
    step.end_of_generation = true;
    return finish(step, "stop");
  }
  const std::string piece = vocab.token_to_piece(step.token, false);
  budget_.accepted(piece);
  held_ += utf8_.push(piece);
  if (cut_at_stop_string()) return finish(step, "stop");
  if (matcher_ && matcher_->finished()) return finish(step, "stop");
  if (params_.max_tokens >= 0 && n_generated_ >= params_.max_tokens) return finish(step, "length");
  // The context is full once the prompt and the generated tokens fill the sequence's cells: the
  // token just sampled would take the last one. So prompt + completion <= n_ctx_per_seq, as the
  // OpenAI API counts a context (and Scheduler::submit refuses a prompt that leaves no room).
  // Before the two paths were merged, generate() went one token further; no test reaches either.
  if (n_past_ + 1 >= model_.n_ctx_per_seq) return finish(step, "length");
  const size_t keep_from = held_back_from();
  step.text = held_.substr(0, keep_from);
  held_.erase(0, keep_from);
  next_ = step.token;
  return step;
}

std::vector<text::Token> Generation::history() const {
  if (next_ < 0 || replaying()) return {};
  std::vector<text::Token> out = tokens_in_cache();
  out.push_back(next_);
  return out;
}

int32_t Generation::draft_room() const {
  if (done_ || next_ < 0 || replaying()) return 0;
  // The waiting token takes position n_past_; a draft of k takes up to n_past_ + k, and next_token()
  // ends the generation once n_past_ + 1 reaches the context, so a last draft row there is useless.
  int64_t room = static_cast<int64_t>(model_.n_ctx_per_seq) - 2 - n_past_;
  // Each kept drafted token is one more sampled token; the row after the last draft samples one too.
  if (params_.max_tokens >= 0) room = std::min<int64_t>(room, params_.max_tokens - n_generated_ - 1);
  return static_cast<int32_t>(std::max<int64_t>(0, room));
}

Feed Generation::feed_draft(model::Batch& batch, std::span<const text::Token> draft) {
  Feed out;
  if (draft.size() > static_cast<size_t>(draft_room())) return out;
  save_feed_state();
  batch.add(next_, n_past_++, seq_, true);
  fed_generated_.push_back(next_);
  next_ = -1;
  for (text::Token t : draft) {
    batch.add(t, n_past_++, seq_, true);
    fed_generated_.push_back(t);
  }
  draft_.assign(draft.begin(), draft.end());
  out.wants_logits = true;
  return out;
}

Generation::DraftResult Generation::accept_draft(std::span<const float> rows) {
  DraftResult out;
  const size_t V = static_cast<size_t>(model_.n_vocab);
  const size_t k = draft_.size();
  // Positions before the waiting token's: every row sees the positions up to its own.
  const int32_t base = n_past_ - static_cast<int32_t>(k) - 1;
  const size_t generated_before = fed_generated_.size() - k;
  for (size_t i = 0; i <= k && (i + 1) * V <= rows.size(); ++i) {
    n_past_ = base + 1 + static_cast<int32_t>(i);
    fed_generated_.resize(generated_before + i);  // what the cache holds for this row
    GenerationStep step = next_token(rows.subspan(i * V, V));
    const bool keep = !step.done && !step.end_of_generation && i < k && step.token == draft_[i];
    out.steps.push_back(std::move(step));
    if (!keep) break;
    fed_generated_.push_back(draft_[i]);  // the drafted token is the one sampled: already in the cache
    next_ = -1;
    ++out.accepted;
  }
  n_past_ = base + 1 + out.accepted;
  draft_.clear();
  return out;
}

// The reasoning budget's forced text when it is due (and the grammar allows it), else a sample.
text::Token Generation::choose(std::span<const float> logits) {
  const text::Token forced = budget_.take_forced();
  if (forced >= 0 && (!matcher_ || grammar_allows(forced))) return forced;
  if (forced >= 0) budget_.abandon();
  return matcher_ ? sample_with_grammar(logits) : sampler_.sample(logits);
}

bool Generation::grammar_allows(text::Token token) const {
  if (token < 0 || !matcher_->allows(token)) return false;
  return !params_.ignore_eos || !model_.vocab->is_eog(token);
}

// The fast path samples from the whole row and checks only the chosen token; when the grammar
// refuses it, the row is masked (one walk of the vocabulary trie) and sampled again. -1 when the
// grammar allows no token at all.
text::Token Generation::sample_with_grammar(std::span<const float> logits) {
  const text::Token first = sampler_.sample(logits);
  if (grammar_allows(first)) return first;
  masked_.assign(logits.begin(), logits.end());
  matcher_->mask(masked_);
  for (text::Token t : eog_tokens_) {
    if (static_cast<size_t>(t) < masked_.size()) masked_[static_cast<size_t>(t)] = -INFINITY;
  }
  const auto best = std::max_element(masked_.begin(), masked_.end());
  if (best == masked_.end() || !std::isfinite(*best)) return -1;
  const text::Token t = sampler_.sample(masked_);
  // A draw can land on a -inf entry only by a uniform draw of exactly 0: take the best allowed one.
  return grammar_allows(t) ? t : static_cast<text::Token>(best - masked_.begin());
}

std::string Generation::finish_early() {
  std::string rest = std::move(held_) + utf8_.flush();
  held_.clear();
  next_ = -1;
  done_ = true;
  return rest;
}

GenerationStep& Generation::finish(GenerationStep& step, const char* reason) {
  step.text = finish_early();
  step.done = true;
  step.finish_reason = reason;
  return step;
}

// A stop string ends the text before it (the first listed one found wins).
bool Generation::cut_at_stop_string() {
  for (const std::string& stop : params_.stop) {
    if (stop.empty()) continue;
    if (const size_t at = held_.find(stop); at != std::string::npos) {
      held_.resize(at);
      utf8_ = text::Utf8Stream();  // an incomplete character after the stop string goes too
      return true;
    }
  }
  return false;
}

// Where the held text's longest tail that could still grow into a stop string begins.
size_t Generation::held_back_from() const {
  size_t keep_from = held_.size();
  for (const std::string& stop : params_.stop) {
    if (stop.empty()) continue;
    for (size_t n = std::min(stop.size() - 1, held_.size()); n > 0; --n) {
      if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
        keep_from = std::min(keep_from, held_.size() - n);
        break;
      }
    }
  }
  return keep_from;
}

// The token's logprob over the full vocabulary, and the most probable alternatives.
TokenLogprob Generation::logprob_of(text::Token token, std::span<const float> logits) const {
  float max = logits[0];
  for (float v : logits) max = std::max(max, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  const text::Vocab& vocab = *model_.vocab;
  TokenLogprob lp{token, vocab.token_to_piece(token, true), logits[token] - log_z, {}};
  for (const auto& c : sampling::Sampler::top_logprobs(logits, params_.top_logprobs)) {
    lp.top.emplace_back(vocab.token_to_piece(c.id, true), c.p);
  }
  return lp;
}

}  // namespace strata::runtime
