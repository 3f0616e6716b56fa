// `strata bench`, in the spirit of llama-bench: prompt processing (pp) and token generation (tg)
// speed over repetitions, plus the memory-bandwidth roofline for decoding.
#pragma once

#include <string>
#include <vector>

#include "runtime/engine.h"

namespace strata::runtime {

struct BenchResult {
  std::string test;        // "pp512", "tg128", "pp512 @ d8192"
  int32_t n_prompt = 0;
  int32_t n_gen = 0;
  int32_t n_depth = 0;
  int32_t rows_per_step = 1;       // generation: tokens each decode step takes (k+1 for a speculative check)
  std::vector<double> samples_ns;  // one per repetition
  bool draft_mtp = false;          // a check whose steps drafted with the MTP block first
  double avg_ts() const;           // tokens per second, mean over repetitions
  double stddev_ts() const;
  double avg_ns() const;
  double stddev_ns() const;
};

// Time to evaluate n_prompt tokens in batches (pp) or to decode n_gen tokens one by one (tg),
// `repetitions` times after one warm-up run, after `depth` tokens already in the context (llama-bench's
// n_depth: filled once, untimed; every run goes back to it, through a state checkpoint on models
// with recurrent layers, so the engine needs one: Engine::needs_checkpoints).
Result<BenchResult> bench_prompt(Engine& engine, int32_t n_prompt, int32_t repetitions, int32_t depth = 0);
Result<BenchResult> bench_generation(Engine& engine, int32_t n_gen, int32_t repetitions, int32_t depth = 0);
// A speculative check of k drafted tokens, as generation does it: n_checks steps, each one batch of
// k+1 rows of one sequence with every row's logits (and, on a model with recurrent layers, the state
// checkpoint taken before it, which needs one more engine checkpoint). Counts n_gen = n_checks.
// `draft_mtp`: each step first drafts its k tokens with the model's MTP block (an engine loaded
// with EngineOptions::mtp), so the step costs what one speculative step of draft-mtp costs.
Result<BenchResult> bench_check(Engine& engine, int32_t k, int32_t n_checks, int32_t repetitions, int32_t depth = 0,
                                bool draft_mtp = false);
// What a check of k drafts costs in one-token decode steps, and the speedup it implies when each
// drafted token is kept with probability `acceptance` (independently): tokens per check, (1 - a^(k+1))
// / (1 - a), over that cost (which counts drafting when the check timed it).
double check_cost(const BenchResult& check, const BenchResult& generation);
double implied_speedup(double cost, int32_t k, double acceptance);

// Bytes of weights one decoded token reads: every layer's weights and the output head, only the
// used share of routed experts, one row of the embeddings.
uint64_t bytes_read_per_token(const model::Model& model);

}  // namespace strata::runtime
