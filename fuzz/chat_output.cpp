// chat::OutputParser on arbitrary text cut into arbitrary pieces. The first byte picks the format,
// the thinking flags and whether tools are parsed; the second seeds the piece sizes; the rest is the
// generated text. Checks what the parser promises: the joined deltas equal its totals, every call
// has a JSON object as arguments, and parsing the text whole gives the same result.
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "fuzz_util.h"

namespace {

using strata::chat::OutputParser;

struct Joined {
  std::string reasoning, content;
  std::vector<std::string> names, arguments;
};

void add(Joined* j, const strata::chat::OutputDelta& d) {
  j->reasoning += d.reasoning;
  j->content += d.content;
  for (const auto& t : d.tool_calls) {
    if (t.index < 0 || static_cast<size_t>(t.index) > j->names.size()) std::abort();
    if (static_cast<size_t>(t.index) == j->names.size()) {
      j->names.push_back(t.name);
      j->arguments.emplace_back();
    }
    j->arguments[t.index] += t.arguments;
  }
}

Joined run(const strata::chat::ChatFormat& f, uint8_t flags, std::string_view text, uint32_t seed, bool whole) {
  std::vector<strata::chat::ToolSpec> tools = {
      {"f", "", nlohmann::json::parse(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"object"}}})")}};
  OutputParser p(f, flags & 4, !(flags & 8), !(flags & 16), tools);
  Joined j;
  std::mt19937 rng(seed);
  for (size_t i = 0; i < text.size();) {
    size_t n = whole ? text.size() : 1 + rng() % 16;
    n = std::min(n, text.size() - i);
    add(&j, p.push(text.substr(i, n)));
    i += n;
  }
  add(&j, p.finish());
  if (j.reasoning != p.reasoning() || j.content != p.content() || j.names.size() != p.tool_calls().size()) std::abort();
  for (size_t i = 0; i < j.names.size(); ++i) {
    const auto& call = p.tool_calls()[i];
    if (call.name != j.names[i] || call.arguments_json != j.arguments[i]) std::abort();
    if (!nlohmann::json::parse(call.arguments_json, nullptr, false).is_object()) std::abort();
  }
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  strata::chat::ChatFormat f;
  f.tools = static_cast<strata::chat::ToolFormat>(data[0] % 4);
  f.thinking = data[0] & 32;
  std::string_view text = strata::fuzz::as_text(data + 2, size - 2);
  Joined pieces = run(f, data[0], text, data[1], false);
  Joined whole = run(f, data[0], text, 0, true);
  // Pieces may cut a UTF-8 character; the fuzzer's text is not whole characters, so compare only
  // what must not depend on the cut: the calls' names and arguments.
  if (pieces.names != whole.names || pieces.arguments != whole.arguments) std::abort();
  return 0;
}
