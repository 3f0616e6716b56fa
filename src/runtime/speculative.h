// Speculative decoding: a cheap guess of the tokens that follow (a draft), checked by the model in
// one batch (Generation::feed_draft / accept_draft), and the sequence cut back to what was kept.
// Greedy output is the same as without speculation, and sampled output follows the model's
// distribution, because every kept token is one the model itself sampled.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"
#include "runtime/generation.h"

namespace strata::runtime {

// llama.cpp's --spec-type names for what Strata implements.
enum class SpecType {
  kNone,
  kNgramSimple,  // prompt lookup: the tokens that followed the last earlier match of the newest n-gram
  kDraftMtp,     // the model's own multi-token-prediction block (Qwen3.5/3.6) drafts token by token
};
Result<SpecType> parse_spec_type(std::string_view name);
std::string_view spec_type_name(SpecType type);

// Flags as llama-server names them.
struct SpecParams {
  SpecType type = SpecType::kNone;  // --spec-type
  int32_t n_max = 3;                // --spec-draft-n-max: the most tokens a draft model (draft-mtp) drafts
  int32_t n_min = 0;                // --spec-draft-n-min: a shorter draft is not checked
  float p_min = 0.0f;               // --spec-draft-p-min: a draft model stops below this probability
  int32_t ngram_n = 12;             // --spec-ngram-simple-size-n: the n-gram looked up
  int32_t ngram_m = 48;             // --spec-ngram-simple-size-m: the most tokens it drafts
  int32_t ngram_min_hits = 1;       // --spec-ngram-simple-min-hits: earlier matches needed
  bool enabled() const { return type != SpecType::kNone; }
  bool mtp() const { return type == SpecType::kDraftMtp; }  // the engine loads the MTP block (EngineOptions::mtp)
};
Status validate(const SpecParams& params);

// The n-gram draft: finds the newest earlier place where history's last n tokens occurred (needing
// min_hits such places) and returns up to m tokens that followed it there.
std::vector<text::Token> ngram_draft(std::span<const text::Token> history, int32_t n, int32_t m, int32_t min_hits = 1);

struct SpecStats {
  int64_t verifies = 0;  // batches that checked a draft
  int64_t drafted = 0;   // drafted tokens checked (llama-server's draft_n)
  int64_t accepted = 0;  // drafted tokens kept (draft_n_accepted)
  std::vector<int64_t> accepted_at;  // per draft position: checks that kept the drafted token there
  double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0; }
  // Counts one check of `drafted` tokens of which the first `kept` were kept.
  void add_check(int64_t drafted_tokens, int32_t kept);
};

// One sequence's speculation against the engine: what to draft next, and the cache kept in step with
// the Generation after a check. A model with recurrent layers cannot cut its state back, so the
// state is checkpointed before each check and, when a drafted token is refused, restored and the
// kept tokens decoded again (the engine must keep one checkpoint per sequence for this:
// checkpoints_needed()).
class Speculation {
 public:
  explicit Speculation(const SpecParams& params) : params_(params) {}
  // State checkpoints per sequence the engine must keep for speculation (a model without recurrent
  // layers keeps none whatever the count).
  static int32_t checkpoints_needed(const SpecParams& params) { return params.enabled() ? 1 : 0; }

  // The draft for the generation's waiting token (empty: decode it alone).
  Result<std::vector<text::Token>> draft(Engine& engine, const Generation& gen) const;
  // Adds the waiting token and the draft to the batch, after checkpointing the sequence.
  Status feed(Engine& engine, Generation& gen, std::span<const text::Token> draft, model::Batch& batch);
  // Samples from the check's rows and cuts the sequence back to what the generation kept.
  Result<Generation::DraftResult> accept(Engine& engine, Generation& gen, std::span<const float> rows);

  const SpecStats& stats() const { return stats_; }

 private:
  Status cut_back(Engine& engine, int32_t seq, int32_t kept);

  SpecParams params_;
  SpecStats stats_;
  bool checkpointed_ = false;     // the state was checkpointed at first_ before the check in flight
  int64_t drafted_ = 0;           // the check's drafted tokens
  int32_t first_ = 0;             // the check's first position
  std::vector<text::Token> fed_;  // the check's tokens, to decode again after a restore
};

}  // namespace strata::runtime
