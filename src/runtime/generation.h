// One request's generation as a state machine, shared by `strata run` (runtime::generate) and every
// server slot. It feeds the prompt into batches, then turns each logits row it asked for into the next
// token, that token's text (whole UTF-8 characters, stop strings cut off) and, when asked, logprobs,
// until end of generation, a stop string, the token limit or a full context. The caller owns the
// batching and the engine call; a Generation never touches the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "model/batch.h"
#include "runtime/reasoning_budget.h"
#include "sampling/sampler.h"
#include "text/vocab.h"

namespace strata::runtime {

struct GenerationParams {
  std::vector<text::Token> prompt;
  int32_t max_tokens = -1;  // < 0: until end of generation or the context is full
  bool ignore_eos = false;  // keep generating past end-of-generation tokens (llama-server's field)
  sampling::Params sampling;
  std::vector<std::string> stop;
  int32_t top_logprobs = -1;  // -1: no logprobs; 0..20: the chosen token's, plus that many alternatives
  // When set, every token is one the grammar allows, end-of-generation only where it may end, and
  // the generation stops ("stop") once the grammar is complete with nothing more allowed.
  std::shared_ptr<const grammar::Grammar> grammar = nullptr;
  ReasoningBudgetParams reasoning_budget;  // thinking closed after this many tokens (none by default)
};

struct TokenLogprob {
  text::Token token;
  std::string text;
  float logprob;
  std::vector<std::pair<std::string, float>> top;  // alternatives (text, logprob)
};

// What a generation needs of the model: the vocabulary (end-of-generation tokens, token text), the
// size of a logits row and the cells of one sequence.
struct GenerationModel {
  const text::Vocab* vocab = nullptr;
  int32_t n_vocab = 0;
  int32_t n_ctx_per_seq = 0;
};

// The rows one Generation::feed() added to a batch.
struct Feed {
  int32_t prompt_rows = 0;    // prompt tokens among them
  bool wants_logits = false;  // the last row asks for logits: hand that row to next_token()
};

// What one logits row turned into.
struct GenerationStep {
  text::Token token = -1;              // the sampled token
  std::string text;                    // text released now (all that is left when done)
  std::vector<TokenLogprob> logprobs;  // the token's, when top_logprobs >= 0
  bool end_of_generation = false;      // the token ends generation; its own text is not emitted
  bool done = false;
  std::string finish_reason;  // "stop" or "length" when done
};

class Generation {
 public:
  // The sampler is built from params.sampling (a random seed is drawn then).
  Generation(const GenerationParams& params, int32_t seq, const GenerationModel& model);
  // With a sampler of the caller's (its seed and history carry over).
  Generation(GenerationParams params, int32_t seq, const GenerationModel& model, sampling::Sampler sampler);

  int32_t seq() const { return seq_; }
  const GenerationParams& params() const { return params_; }
  const sampling::Sampler& sampler() const { return sampler_; }
  int32_t n_generated() const { return n_generated_; }
  int32_t n_past() const { return n_past_; }  // positions of the sequence in the cache
  bool started() const { return prompt_done_ > 0; }
  // The prompt is in and a sampled token waits to be decoded.
  bool generating() const { return next_ >= 0 && !replaying(); }
  bool done() const { return done_; }

  // Prompt caching: the sequence already holds the prompt's first n tokens (0 <= n < prompt size),
  // so feeding starts after them. Call before the first feed().
  void resume_from(int32_t n);
  // Prompt positions a feed() does not cross: the prompt is fed up to each in turn, so the caller can
  // save a state checkpoint there once that batch is decoded.
  void set_prompt_breaks(std::vector<int32_t> positions);
  // After a failed decode whose recovery emptied every cache: forgets the rows of the last feed()
  // when they were in the failed batch, then feeds the tokens the sequence held again (no logits)
  // before going on where it was. Sampler, grammar and text state are untouched, so the output goes
  // on as if nothing had happened.
  void replay_after_failure(bool last_feed_failed);
  // True while the tokens of a lost cache are being fed again.
  bool replaying() const { return n_past_ < static_cast<int32_t>(replay_.size()); }
  int32_t replays() const { return replays_; }
  // True while prompt tokens remain to be fed.
  bool prompting() const { return prompt_done_ < params_.prompt.size(); }
  // The tokens whose positions the sequence holds now (the prompt's fed part, then generated tokens fed).
  std::vector<text::Token> tokens_in_cache() const;

  // How many of each logits row's best entries the sampler can use (Engine::decode's top_k): 0 for
  // whole rows, which logprobs need (their normalizer is over the full vocabulary) and so does a
  // grammar (none of a row's top-k tokens may be allowed).
  int32_t candidates_needed() const;

  // Adds this generation's next rows while the batch holds fewer than `budget`: the sampled token
  // waiting to be decoded, or the next chunk of the prompt. They count as decoded from here on, so a
  // failed decode must end the generation.
  Feed feed(model::Batch& batch, int32_t budget);

  // Samples the next token from the logits row (n_vocab floats) the last feed() asked for; call it
  // once per such feed, and not once done.
  GenerationStep next_token(std::span<const float> logits);

  // Speculative decoding. The tokens speculation may see: those the sequence holds and the sampled
  // token waiting to be decoded (empty while prompting or replaying).
  std::vector<text::Token> history() const;
  // The sampled token waiting to be decoded (-1 while prompting or replaying, or when none waits).
  text::Token waiting() const { return next_ < 0 || replaying() ? -1 : next_; }
  // How many drafted tokens may follow the waiting token: as many as the context and max_tokens
  // leave room to sample (0 when no token waits).
  int32_t draft_room() const;
  // Adds the waiting token and `draft` (tokens guessed to follow it, at most draft_room()) to the
  // batch, every row asking for logits (the batch may hold other sequences' rows).
  Feed feed_draft(model::Batch& batch, std::span<const text::Token> draft);
  // After feed_draft: samples from its rows in order (rows: one n_vocab row per fed token), keeping
  // each drafted token while the token sampled before it equals it, so every token is drawn from the
  // target model's own distribution given the tokens before it (greedy output is the output without
  // speculation). Stops at the first mismatch or when done. `accepted` is the drafted tokens kept; the
  // sequence then holds n_past() positions and the caller cuts the cache back to it.
  struct DraftResult {
    std::vector<GenerationStep> steps;
    int32_t accepted = 0;
  };
  DraftResult accept_draft(std::span<const float> rows);

  // Ends the generation at the caller's request; returns the text still held back.
  std::string finish_early();

 private:
  TokenLogprob logprob_of(text::Token token, std::span<const float> logits) const;
  text::Token sample_with_grammar(std::span<const float> logits);
  text::Token choose(std::span<const float> logits);
  bool grammar_allows(text::Token token) const;
  bool cut_at_stop_string();
  size_t held_back_from() const;
  GenerationStep& finish(GenerationStep& step, const char* reason);

  GenerationParams params_;
  int32_t seq_;
  GenerationModel model_;
  sampling::Sampler sampler_;
  size_t prompt_done_ = 0;  // prompt tokens fed
  int32_t n_past_ = 0;      // positions fed (the prompt's and the generated tokens')
  text::Token next_ = -1;   // sampled and not yet fed
  std::vector<text::Token> fed_generated_;
  std::vector<text::Token> draft_;  // the drafted tokens of the last feed_draft(), until accept_draft()
  std::vector<int32_t> breaks_;  // ascending prompt positions feed() stops at
  struct FeedState {
    size_t prompt_done = 0;
    int32_t n_past = 0;
    text::Token next = -1;
    size_t fed_generated = 0;
    bool valid = false;
  };
  void save_feed_state() { before_feed_ = {prompt_done_, n_past_, next_, fed_generated_.size(), true}; }
  FeedState before_feed_;           // what the last feed() changed, for replay_after_failure()
  std::vector<text::Token> replay_;  // the tokens being fed again; positions n_past_.. are left
  int32_t replays_ = 0;
  int32_t n_generated_ = 0;
  text::Utf8Stream utf8_;
  std::string held_;        // text held back while it may be the start of a stop string
  bool done_ = false;
  std::optional<grammar::Matcher> matcher_;  // when params_.grammar is set
  std::vector<text::Token> eog_tokens_;      // masked with a grammar when ignore_eos
  std::vector<float> masked_;                // the row with the grammar's mask applied
  ReasoningBudget budget_;
};

}  // namespace strata::runtime
