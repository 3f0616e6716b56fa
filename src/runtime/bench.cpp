#include "runtime/bench.h"

#include <fmt/core.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "gguf/names.h"
#include "runtime/generate.h"
#include "runtime/prompt_chunks.h"
#include "tensor/thread_pool.h"

namespace strata::runtime {
namespace {

double mean(const std::vector<double>& v) { return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / (v.size() - 1));
}

std::vector<text::Token> random_tokens(const Engine& engine, int32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, engine.n_vocab() - 1);
  std::vector<text::Token> t(n);
  for (auto& x : t) x = dist(rng);
  return t;
}

bool is_routed_expert(const std::string& name) { return name.find("_exps") != std::string::npos; }

std::string test_name(const char* kind, int32_t n, int32_t depth) {
  return kind + std::to_string(n) + (depth > 0 ? " @ d" + std::to_string(depth) : "");
}

// The context a test runs after (llama-bench's n_depth): sequence 0 holding `depth` random tokens,
// filled once, and a way back to exactly that before every run.
class ContextPrefix {
 public:
  static Result<ContextPrefix> fill(Engine& engine, int32_t depth, int32_t n_test) {
    if (depth < 0 || static_cast<int64_t>(depth) + n_test > engine.n_ctx_per_seq()) {
      return make_error("bench: depth {} plus {} test tokens exceed the context {}", depth, n_test, engine.n_ctx_per_seq());
    }
    STRATA_TRY(engine.clear_seq(0));
    if (depth > 0) {
      STRATA_TRY(evaluate_prompt(engine, 0, random_tokens(engine, depth, 3), false));
      if (engine.needs_checkpoints()) {
        if (engine.n_checkpoints() < 1) return make_error("bench: a depth on a recurrent model needs a state checkpoint");
        STRATA_TRY(engine.save_checkpoint(0, depth));
      }
    }
    return ContextPrefix(engine, depth);
  }
  Status rewind() {
    if (depth_ == 0) return engine_->clear_seq(0);
    if (engine_->needs_checkpoints()) return engine_->restore_checkpoint(0, depth_);
    return engine_->remove_from(0, depth_);
  }

 private:
  ContextPrefix(Engine& engine, int32_t depth) : engine_(&engine), depth_(depth) {}
  Engine* engine_;
  int32_t depth_;
};

}  // namespace

double BenchResult::avg_ns() const { return mean(samples_ns); }
double BenchResult::stddev_ns() const { return stddev(samples_ns); }
double BenchResult::avg_ts() const {
  std::vector<double> ts;
  for (double ns : samples_ns) ts.push_back((n_prompt + n_gen) * 1e9 / ns);
  return mean(ts);
}
double BenchResult::stddev_ts() const {
  std::vector<double> ts;
  for (double ns : samples_ns) ts.push_back((n_prompt + n_gen) * 1e9 / ns);
  return stddev(ts);
}

Result<BenchResult> bench_prompt(Engine& engine, int32_t n_prompt, int32_t repetitions, int32_t depth) {
  if (n_prompt < 1 || n_prompt > engine.n_ctx_per_seq()) {
    return make_error("bench: -p {} must be between 1 and the context {}", n_prompt, engine.n_ctx_per_seq());
  }
  BenchResult r{test_name("pp", n_prompt, depth), n_prompt, 0, depth, 1, {}};
  const std::vector<text::Token> tokens = random_tokens(engine, n_prompt, 1);
  STRATA_ASSIGN(ContextPrefix prefix, ContextPrefix::fill(engine, depth, n_prompt));
  const auto decode_chunk = [&engine](const model::Batch& batch) -> Status {
    STRATA_TRY(engine.decode(batch, 0));
    return {};
  };
  for (int32_t i = -1; i < repetitions; ++i) {  // i == -1: warm-up
    STRATA_TRY(prefix.rewind());
    const auto start = std::chrono::steady_clock::now();
    STRATA_TRY(feed_prompt_chunks(tokens, engine.n_batch(), {0, depth, false}, decode_chunk));
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (i >= 0) r.samples_ns.push_back(ns);
  }
  return r;
}

namespace {

// n_steps decode steps of `rows` tokens of sequence 0 after `depth`, every row's logits as `strata run`
// needs them with default sampling; `before_step` runs ahead of each step, inside the timing.
Result<BenchResult> bench_steps(Engine& engine, BenchResult r, int32_t repetitions,
                                const std::function<Status(int32_t pos)>& before_step) {
  const int32_t rows = r.rows_per_step, steps = r.n_gen, depth = r.n_depth;
  const std::vector<text::Token> tokens = random_tokens(engine, steps * rows, 2);
  const int32_t top_k = sampling::candidates_needed(sampling::Params{}, engine.n_vocab());
  STRATA_ASSIGN(ContextPrefix prefix, ContextPrefix::fill(engine, depth, steps * rows));
  model::Batch batch;
  for (int32_t i = -1; i < repetitions; ++i) {  // i == -1: warm-up
    STRATA_TRY(prefix.rewind());
    const auto start = std::chrono::steady_clock::now();
    for (int32_t t = 0; t < steps * rows; t += rows) {
      if (before_step) STRATA_TRY(before_step(depth + t));
      batch.clear();
      for (int32_t j = t; j < t + rows; ++j) batch.add(tokens[j], depth + j, 0, true);
      STRATA_TRY(engine.decode(batch, top_k));
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (i >= 0) r.samples_ns.push_back(ns);
  }
  return r;
}

}  // namespace

Result<BenchResult> bench_generation(Engine& engine, int32_t n_gen, int32_t repetitions, int32_t depth) {
  if (n_gen < 1 || n_gen > engine.n_ctx_per_seq()) {
    return make_error("bench: -n {} must be between 1 and the context {}", n_gen, engine.n_ctx_per_seq());
  }
  return bench_steps(engine, {test_name("tg", n_gen, depth), 0, n_gen, depth, 1, {}}, repetitions, {});
}

Result<BenchResult> bench_check(Engine& engine, int32_t k, int32_t n_checks, int32_t repetitions, int32_t depth,
                                bool draft_mtp) {
  if (k < 1 || n_checks < 1 || static_cast<int64_t>(n_checks) * (k + 1) > engine.n_ctx_per_seq()) {
    return make_error("bench: {} checks of {} drafted tokens do not fit the context {}", n_checks, k, engine.n_ctx_per_seq());
  }
  const std::string name = fmt::format("{}check k={} ({} rows){}", draft_mtp ? "draft-mtp + " : "", k, k + 1,
                                       depth > 0 ? fmt::format(" @ d{}", depth) : "");
  // As Speculation does: the draft, then a state checkpoint before the check (the last one dropped).
  const model::MtpDraftOptions drafting{k, 0.0f};  // p_min 0: every draft has k tokens
  auto before_check = [&engine, depth, draft_mtp, drafting, held = int32_t{-1}](int32_t pos) mutable -> Status {
    if (draft_mtp) {
      STRATA_ASSIGN(const std::vector<int32_t> draft, engine.draft_mtp(0, 0, pos, drafting));
      if (static_cast<int32_t>(draft.size()) != drafting.n_max) {
        return make_error("bench: the MTP block drafted {} of {} tokens at position {}", draft.size(), drafting.n_max, pos);
      }
    }
    if (!engine.needs_checkpoints()) return {};
    if (held >= 0 && !(depth > 0 && held == depth)) STRATA_TRY(engine.drop_checkpoint(0, held));  // not the prefix's
    held = pos;
    return engine.save_checkpoint(0, pos);
  };
  return bench_steps(engine, {name, 0, n_checks, depth, k + 1, {}, draft_mtp}, repetitions, before_check);
}

double check_cost(const BenchResult& check, const BenchResult& generation) {
  if (check.n_gen <= 0 || generation.n_gen <= 0 || generation.avg_ns() <= 0) return 0;
  return (check.avg_ns() / check.n_gen) / (generation.avg_ns() / generation.n_gen);
}

double implied_speedup(double cost, int32_t k, double acceptance) {
  if (cost <= 0) return 0;
  const double tokens = acceptance >= 1 ? k + 1 : (1 - std::pow(acceptance, k + 1)) / (1 - acceptance);
  return tokens / cost;
}

uint64_t bytes_read_per_token(const model::Model& model) {
  const model::HParams& hp = model.hparams();
  uint64_t bytes = 0;
  for (const auto& t : model.tensors()) {
    if (t.decl.mtp) continue;  // drafting only
    if (t.decl.name == gguf::names::tensor::kTokenEmbd) {
      bytes += t.info->nbytes / std::max<int64_t>(1, t.info->ne[1]);  // one row
      if (model.has_output_weight()) continue;
      bytes += t.info->nbytes;  // tied head reads the whole matrix
    } else if (is_routed_expert(t.decl.name) && hp.n_expert > 0) {
      bytes += t.info->nbytes / hp.n_expert * hp.n_expert_used;
    } else {
      bytes += t.info->nbytes;
    }
  }
  return bytes;
}

}  // namespace strata::runtime
