// Speculative decoding: the n-gram draft, the Generation's check of a draft against hand-made rows,
// and generate() with speculation against generate() without it on real and synthetic models (one
// node, hybrid DeltaNet state restored after a refused draft, 2 nodes layer split and tensor split):
// greedy and seeded sampled tokens are the same, and the run did check drafts and refuse some.
#include <gtest/gtest.h>

#include "runtime/generate.h"
#include "runtime/speculative.h"
#include "testing/cluster.h"
#include "testing/shared_data.h"
#include "text/test_vocab.h"

namespace strata::runtime {
namespace {

using Tokens = std::vector<text::Token>;
using testing::TestCluster;

TEST(NgramDraft, drafts_what_followed_the_newest_earlier_match) {
  //                 0  1  2  3  4  5  6  7  8  9 10 11
  const Tokens h = {5, 6, 7, 8, 9, 5, 6, 7, 1, 2, 5, 6};
  EXPECT_EQ(ngram_draft(h, 2, 3), (Tokens{7, 1, 2}));  // 5 6 at 5 is newer than at 0
  EXPECT_EQ(ngram_draft(h, 2, 2, 2), (Tokens{7, 1}));  // two matches needed: the newest still drafts
  EXPECT_EQ(ngram_draft(h, 2, 3, 3), Tokens{});        // only two earlier matches
  EXPECT_EQ(ngram_draft(h, 3, 8), Tokens{});           // 7 5 6 never occurred before
  EXPECT_EQ(ngram_draft(h, 12, 4), Tokens{});          // longer than the history
  // The draft stops at the end of the history.
  const Tokens tail = {1, 2, 3, 1, 2};
  EXPECT_EQ(ngram_draft(tail, 2, 10), (Tokens{3, 1, 2}));
}

TEST(SpecParams, flags_are_checked_and_llama_cpp_names_not_built_are_named) {
  EXPECT_EQ(parse_spec_type("ngram-simple").value(), SpecType::kNgramSimple);
  EXPECT_EQ(parse_spec_type("none").value(), SpecType::kNone);
  auto mtp = parse_spec_type("draft-eagle3");
  ASSERT_FALSE(mtp.ok());
  EXPECT_NE(mtp.error().message.find("not built"), std::string::npos);
  EXPECT_FALSE(parse_spec_type("ngram").ok());
  SpecParams p;
  EXPECT_TRUE(validate(p).ok());
  p.n_max = 0;
  EXPECT_FALSE(validate(p).ok());
  p = {};
  p.ngram_m = 100000;
  EXPECT_FALSE(validate(p).ok());
  p = {};
  p.p_min = 1.5f;
  EXPECT_FALSE(validate(p).ok());
}

class DraftCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    vocab_ = text::testing_util::load_shared_vocab("models/vocab/ggml-vocab-llama-spm.gguf");
    ASSERT_TRUE(vocab_);
  }
  GenerationModel model(int32_t n_ctx = 64) const { return {vocab_.get(), vocab_->n_tokens(), n_ctx}; }
  // Rows whose favourites are `tokens`, one after another.
  std::vector<float> rows(const Tokens& tokens) const {
    const size_t V = static_cast<size_t>(vocab_->n_tokens());
    std::vector<float> out(tokens.size() * V, 0.0f);
    for (size_t i = 0; i < tokens.size(); ++i) out[i * V + static_cast<size_t>(tokens[i])] = 10.0f;
    return out;
  }
  // A greedy generation with its prompt fed and token 500 sampled, waiting to be decoded.
  Generation started(int32_t max_tokens = -1, int32_t n_ctx = 64) const {
    GenerationParams p;
    p.prompt = {1, 15043, 3186};
    p.max_tokens = max_tokens;
    p.sampling.temp = 0;
    Generation gen(p, 0, model(n_ctx));
    model::Batch b;
    EXPECT_TRUE(gen.feed(b, 512).wants_logits);
    EXPECT_EQ(gen.next_token(rows({500})).token, 500);
    return gen;
  }
  std::shared_ptr<const text::Vocab> vocab_;
};

TEST_F(DraftCheck, keeps_the_drafted_tokens_the_model_samples_and_stops_at_the_first_other) {
  Generation gen = started();
  EXPECT_EQ(gen.history(), (Tokens{1, 15043, 3186, 500}));
  model::Batch b;
  ASSERT_TRUE(gen.feed_draft(b, Tokens{600, 700, 800}).wants_logits);
  ASSERT_EQ(b.size(), 4);
  EXPECT_EQ(b.tokens, (Tokens{500, 600, 700, 800}));
  EXPECT_EQ(b.pos, (std::vector<int32_t>{3, 4, 5, 6}));
  // The model samples 600 and 700 as drafted, then 900 instead of 800: the last row is not read.
  auto r = gen.accept_draft(rows({600, 700, 900, 1000}));
  EXPECT_EQ(r.accepted, 2);
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[0].token, 600);
  EXPECT_EQ(r.steps[2].token, 900);
  EXPECT_EQ(gen.n_past(), 6);  // prompt, 500, 600, 700; 900 waits
  EXPECT_EQ(gen.n_generated(), 4);
  EXPECT_EQ(gen.tokens_in_cache(), (Tokens{1, 15043, 3186, 500, 600, 700}));
  EXPECT_EQ(gen.history(), (Tokens{1, 15043, 3186, 500, 600, 700, 900}));
}

TEST_F(DraftCheck, a_whole_draft_kept_samples_one_more_and_a_first_miss_keeps_none) {
  Generation gen = started();
  model::Batch b;
  ASSERT_TRUE(gen.feed_draft(b, Tokens{600, 700}).wants_logits);
  auto all = gen.accept_draft(rows({600, 700, 42}));
  EXPECT_EQ(all.accepted, 2);
  ASSERT_EQ(all.steps.size(), 3u);
  EXPECT_EQ(all.steps[2].token, 42);
  EXPECT_EQ(gen.n_past(), 6);
  b.clear();
  ASSERT_TRUE(gen.feed_draft(b, Tokens{43, 44}).wants_logits);
  auto none = gen.accept_draft(rows({45, 44, 44}));
  EXPECT_EQ(none.accepted, 0);
  ASSERT_EQ(none.steps.size(), 1u);
  EXPECT_EQ(gen.n_past(), 7);
  EXPECT_EQ(gen.tokens_in_cache().back(), 42);
}

TEST_F(DraftCheck, the_draft_room_follows_max_tokens_and_the_context_and_the_end_stops_the_check) {
  Generation capped = started(4);  // one of 4 tokens sampled: at most 2 drafted, the last row samples the 4th
  EXPECT_EQ(capped.draft_room(), 2);
  model::Batch b;
  EXPECT_FALSE(capped.feed_draft(b, Tokens{1, 2, 3}).wants_logits);
  EXPECT_EQ(b.size(), 0);
  ASSERT_TRUE(capped.feed_draft(b, Tokens{600, 700}).wants_logits);
  auto r = capped.accept_draft(rows({600, 700, 800}));
  EXPECT_TRUE(r.steps.back().done);
  EXPECT_EQ(r.steps.back().finish_reason, "length");
  EXPECT_EQ(capped.n_generated(), 4);
  EXPECT_EQ(capped.draft_room(), 0);

  Generation small = started(-1, 8);  // 8 cells: the waiting token at 3, drafts up to 6
  EXPECT_EQ(small.draft_room(), 3);

  // An end-of-generation token in the middle of a draft ends it there.
  Generation eog = started();
  b.clear();
  ASSERT_TRUE(eog.feed_draft(b, Tokens{600, 700}).wants_logits);
  auto e = eog.accept_draft(rows({vocab_->eos(), 700, 800}));
  ASSERT_EQ(e.steps.size(), 1u);
  EXPECT_TRUE(e.steps[0].end_of_generation);
  EXPECT_TRUE(eog.done());
}

// generate() with and without speculation over the same engine.
struct Run {
  Tokens tokens;
  GenerationStats stats;
};
Run generate_tokens(Engine& e, const Tokens& prompt, int32_t n, const SpecParams& spec, float temp) {
  GenerationRequest req;
  req.prompt = prompt;
  req.n_predict = n;
  req.ignore_eos = true;
  req.spec = spec;
  sampling::Params p;
  p.temp = temp;
  p.seed = 1234;
  Run run;
  auto stats = generate(e, req, sampling::Sampler(p, e.n_vocab()), [&](text::Token t, const std::string&) {
    if (t >= 0) run.tokens.push_back(t);
    return true;
  });
  EXPECT_TRUE(stats.ok()) << stats.error().message;
  if (stats.ok()) run.stats = *stats;
  return run;
}

// Drafts after any earlier occurrence of the last token come often on these models' repetitive output, and some are refused.
SpecParams eager_ngram() {
  SpecParams s;
  s.type = SpecType::kNgramSimple;
  s.ngram_n = 1;
  s.ngram_m = 4;
  return s;
}

const Tokens kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                        403, 407, 261, 378, 432, 383, 286, 261};

// Greedy and seeded sampling at temp 0.8: the same tokens with and without speculation. The
// comparison means something only if drafts were checked, and some kept and some refused.
void expect_same_with_speculation(EngineOptions o, const std::string& what, std::vector<float> temps = {0, 0.8f}) {
  o.n_checkpoints = Speculation::checkpoints_needed(eager_ngram());
  auto e = Engine::load(o);
  ASSERT_TRUE(e.ok()) << what << ": " << e.error().message;
  SpecStats all;
  for (float temp : temps) {
    const Run plain = generate_tokens(**e, kPrompt, 128, {}, temp);
    const Run spec = generate_tokens(**e, kPrompt, 128, eager_ngram(), temp);
    ASSERT_EQ(plain.tokens.size(), 128u) << what;
    EXPECT_EQ(spec.tokens, plain.tokens) << what << " at temp " << temp;
    EXPECT_EQ(plain.stats.spec.drafted, 0) << what;
    all.drafted += spec.stats.spec.drafted;
    all.accepted += spec.stats.spec.accepted;
    all.verifies += spec.stats.spec.verifies;
  }
  EXPECT_GT(all.accepted, 0) << what;
  EXPECT_LT(all.accepted, all.drafted) << what;
  std::printf("[ spec     ] %s: %lld drafted, %lld kept in %lld checks\n", what.c_str(),
              static_cast<long long>(all.drafted), static_cast<long long>(all.accepted),
              static_cast<long long>(all.verifies));
}

TEST(Speculation, greedy_and_sampled_tokens_are_the_same_as_without_it_on_one_node) {
  for (const char* path : {"models/stories260K.gguf", "models/synth/llama-dense-q4_k_m.gguf",
                           "models/synth/qwen3moe-q4_k_m.gguf", "models/synth/qwen35moe-f32.gguf", "models/synth/qwen35-dense-f32.gguf",
                           "models/synth/qwen3next-f32.gguf"}) {
    STRATA_SHARED_FILE(model, path);
    expect_same_with_speculation(testing::single_node_options(model), path);
  }
}

TEST(Speculation, greedy_tokens_are_the_same_as_without_it_over_two_nodes) {
  TestCluster cluster(2, 1, "speculation");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  for (const char* path : {"models/synth/llama-dense-q4_k_m.gguf", "models/synth/qwen35-dense-f32.gguf"}) {
    STRATA_SHARED_FILE(model, path);
    EngineOptions layers = testing::cluster_options(model, cluster);
    layers.cluster.workers.resize(1);
    layers.cluster.tensor_split = {1, 1};
    expect_same_with_speculation(layers, std::string(path) + " layer split", {0});
    EngineOptions tensor = layers;
    tensor.cluster.split_mode = plan::SplitMode::kTensor;
    expect_same_with_speculation(tensor, std::string(path) + " tensor split", {0});
  }
}

}  // namespace
}  // namespace strata::runtime
