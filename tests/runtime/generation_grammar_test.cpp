// A real model generating under a JSON-schema grammar through runtime::generate (the Generation state
// machine every server slot uses): every seed gives a document that parses and fits the schema, and
// ends by the grammar being complete.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "runtime/generate.h"
#include "testing/shared_data.h"
#include "text/test_vocab.h"

namespace strata::runtime {
namespace {

using nlohmann::json;

TEST(GrammarGeneration, a_tiny_model_writes_valid_json_for_every_seed) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  EngineOptions o;
  o.model_path = path;
  o.n_ctx = 512;
  o.n_threads = 1;
  auto engine = Engine::load(o);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  Engine& e = **engine;
  const json schema = json::parse(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":10},
      "age":{"type":"integer","minimum":1,"maximum":99},
      "pets":{"type":"array","items":{"enum":["cat","dog"]},"maxItems":3}},
      "required":["name","age","pets"]})");
  auto gbnf = grammar::json_schema_to_gbnf(schema);
  ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
  auto g = grammar::parse_gbnf(*gbnf);
  ASSERT_TRUE(g.ok()) << g.error().message;

  for (uint32_t seed = 1; seed <= 20; ++seed) {
    GenerationRequest request{e.vocab().tokenize("Once upon a time", true, false), 300, 0, false, *g};
    sampling::Params p;
    p.temp = 1.5f;  // far from the model's favourites: the grammar does the work
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    std::string out;
    auto stats = generate(e, request, sampling::Sampler(p, e.n_vocab()), [&](text::Token, const std::string& t) {
      out += t;
      return true;
    });
    ASSERT_TRUE(stats.ok()) << stats.error().message;
    EXPECT_LT(stats->n_generated, 300) << "seed " << seed << ": " << out;  // ended by the grammar
    json doc;
    ASSERT_NO_THROW(doc = json::parse(out)) << "seed " << seed << ": " << out;
    ASSERT_TRUE(doc.is_object()) << out;
    EXPECT_EQ(doc.size(), 3u) << out;
    ASSERT_TRUE(doc["name"].is_string()) << out;
    EXPECT_LE(doc["name"].get<std::string>().size(), 40u) << out;
    ASSERT_TRUE(doc["age"].is_number_integer()) << out;
    EXPECT_GE(doc["age"].get<int>(), 1);
    EXPECT_LE(doc["age"].get<int>(), 99);
    ASSERT_TRUE(doc["pets"].is_array()) << out;
    EXPECT_LE(doc["pets"].size(), 3u);
    for (const auto& pet : doc["pets"]) EXPECT_TRUE(pet == "cat" || pet == "dog") << out;
  }
}

// Hand-made rows whose favourite the grammar refuses: the Generation masks them and takes the
// grammar's best, allows end-of-generation only at the end, and stops when the grammar is complete.
TEST(GrammarGeneration, refused_favourites_are_masked_and_the_grammar_ends_the_generation) {
  auto vocab = text::testing_util::load_shared_vocab("models/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(vocab);
  const GenerationModel model{vocab.get(), vocab->n_tokens(), 256};
  auto token_of = [&](const std::string& piece) {
    for (text::Token t = 0; t < vocab->n_tokens(); ++t) {
      if (vocab->token_to_piece(t, false) == piece) return t;
    }
    ADD_FAILURE() << "no token " << piece;
    return text::Token{0};
  };
  for (bool ignore_eos : {false, true}) {
    GenerationParams params;
    params.prompt = {1};
    params.sampling.temp = 0;
    params.ignore_eos = ignore_eos;
    params.grammar = *grammar::parse_gbnf(R"(root ::= "yes" | "no" "!"?)");
    Generation gen(params, 0, model);
    model::Batch batch;
    ASSERT_TRUE(gen.feed(batch, 8).wants_logits);
    std::vector<float> row(static_cast<size_t>(vocab->n_tokens()), 0.0f);
    row[static_cast<size_t>(vocab->eos())] = 9.0f;         // refused: the grammar is not complete
    row[static_cast<size_t>(token_of("maybe"))] = 8.0f;    // refused
    row[static_cast<size_t>(token_of("no"))] = 5.0f;
    GenerationStep step = gen.next_token(row);
    EXPECT_EQ(step.token, token_of("no"));
    EXPECT_FALSE(step.done);
    batch.clear();
    ASSERT_TRUE(gen.feed(batch, 8).wants_logits);
    row.assign(row.size(), 0.0f);
    row[static_cast<size_t>(vocab->eos())] = 9.0f;  // allowed now (unless ignore_eos)
    row[static_cast<size_t>(token_of("!"))] = 5.0f;
    step = gen.next_token(row);
    EXPECT_TRUE(step.done);
    EXPECT_EQ(step.finish_reason, "stop");
    if (ignore_eos) {
      EXPECT_EQ(step.token, token_of("!"));  // end tokens stay masked; the grammar then ends it
      EXPECT_FALSE(step.end_of_generation);
      EXPECT_EQ(step.text, "!");
    } else {
      EXPECT_EQ(step.token, vocab->eos());
      EXPECT_TRUE(step.end_of_generation);
    }
  }
}

// With a grammar the whole row is needed: a remote head's top-k might hold no allowed token.
TEST(GrammarGeneration, a_grammar_asks_for_whole_logit_rows) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  EngineOptions o;
  o.model_path = path;
  o.n_ctx = 64;
  o.n_threads = 1;
  auto engine = Engine::load(o);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  GenerationParams params;
  params.prompt = {1};
  params.sampling.temp = 0;  // greedy alone would need 1 candidate
  EXPECT_EQ(Generation(params, 0, generation_model(**engine)).candidates_needed(), 1);
  params.grammar = *grammar::parse_gbnf("root ::= \"a\"");
  EXPECT_EQ(Generation(params, 0, generation_model(**engine)).candidates_needed(), 0);
}

}  // namespace
}  // namespace strata::runtime
