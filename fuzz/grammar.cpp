// GBNF grammars and JSON schemas from arbitrary bytes. The first byte picks the input kind (even:
// GBNF text, odd: a JSON schema); the text runs to the first NUL and the bytes after it choose
// tokens. Checked: no crash or hang; a schema that converts gives GBNF that parses (unless a size
// limit refuses it); on a parsed grammar, mask() agrees with allows() on every token of a small
// SentencePiece vocabulary (stories260K, 512 tokens) and accept() takes every allowed token.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "grammar/grammar.h"

namespace {

const strata::text::Vocab& vocab() {
  static const auto v = strata::fuzz::load_vocab("models/stories260K.gguf");
  return *v;
}

bool is_limit_error(const std::string& message) {
  return message.find("limit") != std::string::npos || message.find("more than") != std::string::npos;
}

void drive(const std::shared_ptr<const strata::grammar::Grammar>& g, std::string_view choices) {
  strata::grammar::Matcher m(g, vocab());
  std::vector<float> logits(static_cast<size_t>(vocab().n_tokens()));
  for (size_t step = 0; step < choices.size() && step < 64 && !m.finished(); ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    m.mask(logits);
    std::vector<strata::text::Token> allowed;
    for (strata::text::Token t = 0; t < vocab().n_tokens(); ++t) {
      const bool kept = logits[static_cast<size_t>(t)] == 0.0f;
      if (kept != m.allows(t)) __builtin_trap();
      if (kept && !vocab().is_eog(t)) allowed.push_back(t);
    }
    if (allowed.empty()) return;
    const strata::text::Token t = allowed[static_cast<uint8_t>(choices[step]) % allowed.size()];
    if (!m.accept(t).ok()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  strata::fuzz::quiet_logs();
  (void)vocab();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto [text, choices] = strata::fuzz::split_once(strata::fuzz::as_text(data + 1, size - 1), std::string_view("\0", 1));
  std::string gbnf(text);
  if (data[0] & 1) {
    const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
    if (schema.is_discarded()) return 0;
    auto converted = strata::grammar::json_schema_to_gbnf(schema, (data[0] & 2) ? "p-" : "");
    if (!converted.ok()) return 0;
    gbnf = std::move(converted).value();
    if (data[0] & 2) gbnf = "root ::= p-root\n" + gbnf;
  }
  auto g = strata::grammar::parse_gbnf(gbnf);
  if (!g.ok()) {
    if ((data[0] & 1) && !is_limit_error(g.error().message)) __builtin_trap();  // the converter wrote bad GBNF
    return 0;
  }
  drive(g.value(), choices);
  return 0;
}
