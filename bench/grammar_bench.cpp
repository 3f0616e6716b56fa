// Grammar masking: the time to mask one logits row under a JSON-schema grammar, on Qwen3's real
// 151,936-token vocabulary and on a 248,320-token one (Qwen3.5/3.6's size: Qwen3's tokens plus 96,384
// more, each two random Qwen3 tokens joined). States: before the object, inside a string value
// of at most 200 characters or of any length (nearly every token allowed: the worst case), before an
// integer value, inside an enum array.
//   repeat: the same state masked again (the Matcher keeps the answers of its last 8 states)
//   cold:   a fresh Matcher each time (no cached transitions: the trie walk builds every state it meets)
//   step:   generation: mask, then accept a one-byte token, so every mask is of a new state (the
//           transitions met by earlier walks are cached), restarting every 150 tokens
//
//   ./strata_microbench --benchmark_filter='grammar_mask'
#include <benchmark/benchmark.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_trie.h"
#include "gguf/gguf.h"
#include "text/vocab.h"

namespace strata::grammar {
namespace {

constexpr int32_t kQwen35Tokens = 248320;

// A base vocabulary with extra tokens appended (two base tokens' texts joined, deterministically).
class ExtendedVocab : public text::Vocab {
 public:
  ExtendedVocab(std::shared_ptr<const text::Vocab> base, int32_t n_total) : base_(std::move(base)) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    auto next = [&s] {
      s ^= s >> 12;
      s ^= s << 25;
      s ^= s >> 27;
      return s * 0x2545F4914F6CDD1Dull;
    };
    const int32_t n_base = base_->n_tokens();
    while (n_base + static_cast<int32_t>(extra_.size()) < n_total) {
      const auto a = static_cast<text::Token>(next() % 150000), b = static_cast<text::Token>(next() % 150000);
      std::string piece = base_->token_to_piece(a, false) + base_->token_to_piece(b, false);
      if (!piece.empty()) extra_.push_back(std::move(piece));
    }
  }
  text::VocabKind kind() const override { return base_->kind(); }
  int32_t n_tokens() const override { return base_->n_tokens() + static_cast<int32_t>(extra_.size()); }
  std::string_view token_text(text::Token t) const override { return is_base(t) ? base_->token_text(t) : extra(t); }
  text::TokenType token_type(text::Token t) const override { return is_base(t) ? base_->token_type(t) : text::TokenType::Normal; }
  text::Token bos() const override { return base_->bos(); }
  text::Token eos() const override { return base_->eos(); }
  bool add_bos() const override { return base_->add_bos(); }
  bool add_eos() const override { return base_->add_eos(); }
  bool is_eog(text::Token t) const override { return is_base(t) && base_->is_eog(t); }
  size_t max_bytes_per_token() const override { return 0; }
  std::vector<text::Token> tokenize(std::string_view s, bool a, bool p) const override { return base_->tokenize(s, a, p); }
  std::string token_to_piece(text::Token t, bool special) const override {
    return is_base(t) ? base_->token_to_piece(t, special) : std::string(extra(t));
  }
  std::string detokenize(std::span<const text::Token> tokens, bool, bool) const override {
    std::string out;
    for (text::Token t : tokens) out += token_to_piece(t, false);
    return out;
  }

 private:
  bool is_base(text::Token t) const { return t < base_->n_tokens(); }
  std::string_view extra(text::Token t) const {
    const size_t i = static_cast<size_t>(t - base_->n_tokens());
    return i < extra_.size() ? std::string_view(extra_[i]) : std::string_view();
  }
  std::shared_ptr<const text::Vocab> base_;
  std::vector<std::string> extra_;
};

std::shared_ptr<const text::Vocab> qwen3_vocab() {
  static std::shared_ptr<const text::Vocab> vocab = [] {
    auto file = gguf::File::open(STRATA_SHARED_DIR "/models/vocab/ggml-vocab-qwen3.gguf");
    if (!file.ok()) return std::shared_ptr<const text::Vocab>();
    auto v = text::Vocab::load(*file.value());
    return v.ok() ? v.value() : std::shared_ptr<const text::Vocab>();
  }();
  return vocab;
}

const text::Vocab* vocab_of(int which) {
  static std::shared_ptr<const text::Vocab> extended;
  if (!qwen3_vocab()) return nullptr;
  if (which == 0) return qwen3_vocab().get();
  if (!extended) extended = std::make_shared<ExtendedVocab>(qwen3_vocab(), kQwen35Tokens);
  return extended.get();
}

std::shared_ptr<const Grammar> schema_grammar() {
  static std::shared_ptr<const Grammar> g = [] {
    const auto schema = nlohmann::ordered_json::parse(R"({"type":"object","properties":{
        "name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
        "tags":{"type":"array","items":{"enum":["red","green","blue"]},"maxItems":5},
        "note":{"type":"string","maxLength":200}},"required":["name","age"]})");
    auto g2 = parse_gbnf(*json_schema_to_gbnf(schema));
    return g2.value();
  }();
  return g;
}

const char* const kStates[] = {"", R"({"name": "x", "age": 42, "note": "Ab)", R"({"name": "x", "age": 42, "tags": [)",
                               R"({"name": "x", "age": )", R"({"name": "Ab)"};
const char* const kStateNames[] = {"start", "in_string_max200", "in_enum_array", "before_integer", "in_string"};

// A matcher after `prefix`, spelled byte by byte (Qwen3 has a token for every byte).
Matcher at_state(const text::Vocab& vocab, const char* prefix, bool* ok = nullptr) {
  static std::vector<text::Token> byte_tokens;
  if (byte_tokens.empty()) {
    byte_tokens.assign(256, -1);
    for (text::Token t = 0; t < vocab.n_tokens(); ++t) {
      const std::string piece = vocab.token_to_piece(t, false);
      if (piece.size() == 1 && byte_tokens[static_cast<uint8_t>(piece[0])] < 0) byte_tokens[static_cast<uint8_t>(piece[0])] = t;
    }
  }
  Matcher m(schema_grammar(), vocab);
  bool all = true;
  for (const char* c = prefix; *c; ++c) all = all && m.accept(byte_tokens[static_cast<uint8_t>(*c)]).ok();
  if (ok) *ok = all;
  return m;
}

// args: vocab (0 qwen3, 1 248k), state index, mode (0 repeat, 1 cold, 2 step)
void BM_GrammarMask(benchmark::State& state) {
  const text::Vocab* vocab = vocab_of(static_cast<int>(state.range(0)));
  if (vocab == nullptr) {
    state.SkipWithError("ggml-vocab-qwen3.gguf not found under STRATA_SHARED_DIR");
    return;
  }
  const char* prefix = kStates[state.range(1)];
  const int64_t mode = state.range(2);
  std::vector<float> logits(static_cast<size_t>(vocab->n_tokens()), 0.0f);
  bool ok = false;
  Matcher warm = at_state(*vocab, prefix, &ok);
  if (!ok) {
    state.SkipWithError("the state's prefix was refused by the grammar");
    return;
  }
  warm.mask(logits);
  size_t allowed = 0;
  for (float l : logits) allowed += l == 0.0f;
  const text::Token step_token = vocab->tokenize("a", false, false).at(0);
  int steps = 0;
  for (auto _ : state) {
    if (mode == 1) {
      state.PauseTiming();
      Matcher m = at_state(*vocab, prefix);
      state.ResumeTiming();
      m.mask(logits);
    } else if (mode == 2) {
      warm.mask(logits);
      if (++steps == 150 || !warm.accept(step_token).ok()) {
        state.PauseTiming();
        warm = at_state(*vocab, prefix);
        steps = 0;
        state.ResumeTiming();
      }
    } else {
      warm.mask(logits);
    }
    benchmark::DoNotOptimize(logits.data());
  }
  const char* modes[] = {"repeat", "cold", "step"};
  state.SetLabel(fmt::format("{} tokens, {}, {}: {} allowed", vocab->n_tokens(), kStateNames[state.range(1)],
                             modes[mode], allowed));
}
BENCHMARK(BM_GrammarMask)->Name("grammar_mask")->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4}, {0, 1, 2}})->Unit(benchmark::kMillisecond);

// The fast path: checking only the sampled token.
void BM_GrammarAllows(benchmark::State& state) {
  const text::Vocab* vocab = vocab_of(1);
  if (vocab == nullptr) {
    state.SkipWithError("ggml-vocab-qwen3.gguf not found under STRATA_SHARED_DIR");
    return;
  }
  Matcher m = at_state(*vocab, kStates[1]);
  text::Token t = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.allows(t));
    t = (t + 7919) % vocab->n_tokens();
  }
}
// Builds the trie (once per vocabulary in a process) and reports its size.
void BM_GrammarTrie(benchmark::State& state) {
  const text::Vocab* vocab = vocab_of(static_cast<int>(state.range(0)));
  if (vocab == nullptr) {
    state.SkipWithError("ggml-vocab-qwen3.gguf not found under STRATA_SHARED_DIR");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(token_trie(*vocab));
  const auto trie = token_trie(*vocab);
  state.SetLabel(fmt::format("{} tokens: {} byte nodes, {} radix nodes", vocab->n_tokens(), trie->n_byte_nodes,
                             trie->level.size()));
}
BENCHMARK(BM_GrammarTrie)->Name("grammar_trie")->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_GrammarAllows)->Name("grammar_allows/248k/in_string");

}  // namespace
}  // namespace strata::grammar
