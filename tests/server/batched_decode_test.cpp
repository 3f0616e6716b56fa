// Slots decoding together: every scheduler step puts the next token of every generating slot (and the
// prompt chunks of new requests) into one engine call, and each slot's tokens and logprobs are bit for
// bit those of the same request alone on a one-slot engine. Models: repacked K-quant weights (one
// kernel for 1..8 tokens), a hybrid MoE model (gated delta net state per sequence) and an F32 one.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "server/scheduler.h"
#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata::server {
namespace {

constexpr int32_t kTokens = 24;
constexpr int32_t kThreads = 2;

struct Output {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::string finish_reason;
  int32_t n_generated = 0;
};

// Four different requests: seeded sampling with logprobs, greedy with the chosen token's logprob
// only, and seeded sampling without logprobs (the sampler may then take only the best candidates).
std::vector<GenerationParams> requests(const runtime::Engine& e, int32_t n_tokens) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog ran", "Lily and Tom went to the",
                                            "One day, a bird"};
  std::vector<GenerationParams> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationParams p;
    p.prompt = e.vocab().tokenize(prompts[i], true, false);
    p.max_tokens = n_tokens;
    p.ignore_eos = true;
    p.sampling.temp = i == 2 ? 0.0f : 0.8f;
    p.sampling.seed = 100 + static_cast<uint32_t>(i);
    p.top_logprobs = i < 2 ? 3 : i == 2 ? 0 : -1;
    out.push_back(std::move(p));
  }
  return out;
}

std::unique_ptr<runtime::Engine> load(const std::string& path, int32_t n_seq, const runtime::SpecParams& spec = {}) {
  runtime::EngineOptions o;
  o.model_path = path;
  o.n_seq = n_seq;
  o.n_checkpoints = runtime::Speculation::checkpoints_needed(spec);
  o.mtp = spec.mtp();
  o.n_ctx = 256 * n_seq;  // the same context per slot either way
  o.n_threads = kThreads;
  auto e = runtime::Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(*e) : nullptr;
}

Output wait(Request& r) {
  Output out;
  Request::Chunk c;
  for (int waits = 0; !c.done && waits < 1200; ++waits) {
    c = r.next(std::chrono::milliseconds(100));
    out.text += c.text;
    for (auto& l : c.logprobs) out.logprobs.push_back(std::move(l));
  }
  EXPECT_TRUE(c.done);
  EXPECT_EQ(c.error, "");
  out.finish_reason = c.finish_reason;
  out.n_generated = r.n_generated();
  return out;
}

// Each request alone, one after another, on a fresh one-slot engine.
std::vector<Output> run_alone(const std::string& path, int32_t n_tokens) {
  auto engine = load(path, 1);
  if (!engine) return {};
  Scheduler scheduler(*engine);
  std::vector<Output> out;
  for (GenerationParams& p : requests(*engine, n_tokens)) {
    auto r = scheduler.submit(std::move(p), CacheHints{false, -1});
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) return {};
    out.push_back(wait(**r));
  }
  EXPECT_EQ(scheduler.stats().decode_calls, 4u * n_tokens);  // prompt, then one call per further token
  return out;
}

void expect_same(const std::vector<Output>& got, const std::vector<Output>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].n_generated, want[i].n_generated) << what << ", request " << i;
    EXPECT_EQ(got[i].finish_reason, "length") << what << ", request " << i;
    EXPECT_EQ(got[i].text, want[i].text) << what << ", request " << i;
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size()) << what << ", request " << i;
    for (size_t t = 0; t < want[i].logprobs.size(); ++t) {
      const TokenLogprob& a = got[i].logprobs[t];
      const TokenLogprob& b = want[i].logprobs[t];
      EXPECT_EQ(a.token, b.token) << what << ", request " << i << ", token " << t;
      EXPECT_EQ(a.logprob, b.logprob) << what << ", request " << i << ", token " << t;  // bit for bit
      EXPECT_EQ(a.top, b.top) << what << ", request " << i << ", token " << t;
    }
  }
}

// The four requests queued at once: one call for the four prompts, then one per step for all four
// slots, and every slot's output is the one it gets alone.
void four_slots_together(const std::string& path) {
  const std::vector<Output> alone = run_alone(path, kTokens);
  ASSERT_EQ(alone.size(), 4u);
  EXPECT_EQ(alone[0].logprobs.size(), static_cast<size_t>(kTokens));
  EXPECT_NE(alone[0].text, alone[1].text);

  auto engine = load(path, 4);
  ASSERT_TRUE(engine);
  Scheduler scheduler(*engine);
  auto reqs = scheduler.submit_all(requests(*engine, kTokens));
  ASSERT_TRUE(reqs.ok()) << reqs.error().message;
  std::vector<Output> together;
  for (auto& r : *reqs) together.push_back(wait(*r));
  expect_same(together, alone, "four slots together");
  const SchedulerStats s = scheduler.stats();
  EXPECT_EQ(s.decode_calls, static_cast<uint64_t>(kTokens)) << "the slots did not decode in the same calls";
  EXPECT_EQ(s.decode_slots, 4u * kTokens);
  EXPECT_EQ(s.generated_tokens, 4u * kTokens);
}

// Two requests generating, then two more arriving: their prompts join the running slots' calls, and
// still nothing changes in any output.
void late_arrivals_join_running_slots(const std::string& path) {
  const std::vector<Output> alone = run_alone(path, kTokens);
  ASSERT_EQ(alone.size(), 4u);
  auto engine = load(path, 4);
  ASSERT_TRUE(engine);
  Scheduler scheduler(*engine);
  std::vector<GenerationParams> params = requests(*engine, kTokens);
  std::vector<GenerationParams> first(params.begin(), params.begin() + 2), second(params.begin() + 2, params.end());
  auto a = scheduler.submit_all(std::move(first));
  ASSERT_TRUE(a.ok()) << a.error().message;
  for (int i = 0; i < 2000 && (*a)[1]->n_generated() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto b = scheduler.submit_all(std::move(second));
  ASSERT_TRUE(b.ok()) << b.error().message;
  std::vector<Output> got;
  for (auto& r : *a) got.push_back(wait(*r));
  for (auto& r : *b) got.push_back(wait(*r));
  expect_same(got, alone, "late arrivals");
  EXPECT_LT(scheduler.stats().decode_calls, 4u * kTokens);
}

TEST(BatchedDecode, four_slots_together_match_each_alone_with_repacked_k_quants) {
  STRATA_SHARED_FILE(path, "models/synth/llama-dense-q4_k_m.gguf");
  four_slots_together(path);
}

TEST(BatchedDecode, four_slots_together_match_each_alone_with_recurrent_layers_and_experts) {
  STRATA_SHARED_FILE(path, "models/synth/qwen35moe-q4_k_m.gguf");
  four_slots_together(path);
}

TEST(BatchedDecode, four_slots_together_match_each_alone_with_f32_weights) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  four_slots_together(path);
}

TEST(BatchedDecode, requests_arriving_mid_generation_join_without_changing_any_output) {
  STRATA_SHARED_FILE(path, "models/synth/llama-dense-q4_k_m.gguf");
  late_arrivals_join_running_slots(path);
}

// Speculation in every slot: each slot's draft is checked in the same engine call as the other
// slots' rows, and every output (text, tokens, logprobs) is still the one the request gets alone
// without speculation. The comparison means something only if drafts were kept and refused.
// Returns the drafted tokens kept.
int32_t four_slots_speculating(const std::string& path, const runtime::SpecParams& spec) {
  constexpr int32_t kLonger = 64;  // more chances for a draft
  const std::vector<Output> alone = run_alone(path, kLonger);
  EXPECT_EQ(alone.size(), 4u);
  if (alone.size() != 4) return 0;
  auto engine = load(path, 4, spec);
  if (!engine) return 0;
  SchedulerOptions options;
  options.spec = spec;
  Scheduler scheduler(*engine, options);
  auto reqs = scheduler.submit_all(requests(*engine, kLonger));
  EXPECT_TRUE(reqs.ok()) << reqs.error().message;
  if (!reqs.ok()) return 0;
  std::vector<Output> together;
  int32_t drafted = 0, kept = 0;
  for (auto& r : *reqs) {
    together.push_back(wait(*r));
    EXPECT_TRUE(r->speculative());
    drafted += r->draft_n();
    kept += r->draft_n_accepted();
  }
  expect_same(together, alone, path + " speculating");
  const SchedulerStats s = scheduler.stats();
  EXPECT_EQ(s.spec.drafted, drafted);
  EXPECT_EQ(s.spec.accepted, kept);
  EXPECT_GT(s.spec.verifies, 0);
  EXPECT_LT(kept, drafted) << path;
  EXPECT_LT(s.decode_calls, 4u * kLonger) << "the slots did not decode together";
  std::printf("[ spec     ] %s: %d drafted, %d kept in %lld checks, %llu engine calls\n", path.c_str(), drafted, kept,
              static_cast<long long>(s.spec.verifies), static_cast<unsigned long long>(s.decode_calls));
  return kept;
}

runtime::SpecParams eager_ngram() {
  runtime::SpecParams s;
  s.type = runtime::SpecType::kNgramSimple;
  s.ngram_n = 1;
  s.ngram_m = 4;
  return s;
}

TEST(BatchedDecode, four_slots_speculating_match_each_alone_without_speculation) {
  int32_t kept = 0;
  for (const char* rel : {"models/stories260K.gguf", "models/synth/llama-dense-q4_k_m.gguf",
                          "models/synth/qwen35moe-q4_k_m.gguf"}) {
    STRATA_SHARED_FILE(path, rel);
    kept += four_slots_speculating(path, eager_ngram());
  }
  EXPECT_GT(kept, 0);
}

// draft-mtp: each slot's drafts come from the MTP block's own cache row of that sequence.
TEST(BatchedDecode, four_slots_drafting_with_the_mtp_block_match_each_alone_without_it) {
  const std::string path = (std::filesystem::temp_directory_path() / ("strata-batched-mtp-" + std::to_string(::getpid()) +
                                                                      ".gguf")).string();
  const auto made = testing::run_command(testing::shell_quote(testing::strata_binary()) +
                                         " -q synth --arch qwen35moe --mtp -o " + testing::shell_quote(path));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  runtime::SpecParams mtp;
  mtp.type = runtime::SpecType::kDraftMtp;
  four_slots_speculating(path, mtp);
  std::filesystem::remove(path);
}

TEST(BatchedDecode, submit_all_queues_nothing_when_one_request_is_bad) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto engine = load(path, 2);
  ASSERT_TRUE(engine);
  Scheduler scheduler(*engine);
  std::vector<GenerationParams> params = requests(*engine, 4);
  params[2].prompt.clear();
  auto r = scheduler.submit_all(std::move(params));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("request 2"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(scheduler.stats().requests_total, 0u);
  EXPECT_EQ(scheduler.stats().queue_depth, 0);
}

}  // namespace
}  // namespace strata::server
