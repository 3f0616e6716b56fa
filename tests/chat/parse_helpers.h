// Feeding OutputParser in pieces and joining what it streams.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "chat/chat_format.h"

namespace strata::chat::testing {

struct Joined {
  std::string reasoning, content;
  std::vector<ToolCall> calls;  // rebuilt from the deltas
  bool operator==(const Joined&) const = default;
};

inline void add_delta(Joined* j, const OutputDelta& d) {
  j->reasoning += d.reasoning;
  j->content += d.content;
  for (const auto& t : d.tool_calls) {
    ASSERT_GE(t.index, 0);
    ASSERT_LE(static_cast<size_t>(t.index), j->calls.size()) << "a delta skipped an index";
    if (static_cast<size_t>(t.index) == j->calls.size()) {
      ASSERT_FALSE(t.name.empty()) << "a call's first delta carries its name";
      ASSERT_FALSE(t.id.empty()) << "a call's first delta carries its id";
      j->calls.push_back(ToolCall{t.id, t.name, ""});
    } else {
      ASSERT_TRUE(t.name.empty() && t.id.empty()) << "name and id come once";
    }
    j->calls[t.index].arguments_json += t.arguments;
  }
}

struct ParserSetup {
  ChatFormat format;
  bool starts_in_reasoning = false;
  bool split_reasoning = true;
  bool parse_tools = true;
  std::vector<ToolSpec> tools;
};

// Feeds `pieces` then finish(); checks that the joined deltas equal the parser's own totals at the
// end, and returns them.
inline Joined run_pieces(const ParserSetup& s, const std::vector<std::string>& pieces) {
  OutputParser p(s.format, s.starts_in_reasoning, s.split_reasoning, s.parse_tools, s.tools);
  p.set_call_id_seed(7);
  Joined j;
  for (const auto& piece : pieces) add_delta(&j, p.push(piece));
  add_delta(&j, p.finish());
  EXPECT_EQ(j.reasoning, p.reasoning());
  EXPECT_EQ(j.content, p.content());
  EXPECT_EQ(j.calls.size(), p.tool_calls().size());
  if (j.calls.size() == p.tool_calls().size()) {
    for (size_t i = 0; i < j.calls.size(); ++i) EXPECT_TRUE(j.calls[i] == p.tool_calls()[i]) << "call " << i;
  }
  return j;
}

inline size_t utf8_len(unsigned char c) { return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1; }

inline std::vector<std::string> split_chars(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = std::min(utf8_len(static_cast<unsigned char>(text[i])), text.size() - i);
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

inline std::vector<std::string> split_random(const std::string& text, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> chars = split_chars(text), out;
  std::uniform_int_distribution<size_t> len(1, 12);
  for (size_t i = 0; i < chars.size();) {
    std::string piece;
    for (size_t n = len(rng); n > 0 && i < chars.size(); --n) piece += chars[i++];
    out.push_back(piece);
  }
  return out;
}

// Parses `text` whole, one character at a time, one byte at a time and in random chunks: every way
// gives the same result (the whole-text one is returned).
inline Joined parse_all_ways(const ParserSetup& s, const std::string& text) {
  Joined whole = run_pieces(s, {text});
  EXPECT_TRUE(run_pieces(s, split_chars(text)) == whole) << "one character at a time: " << text;
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_TRUE(run_pieces(s, bytes) == whole) << "one byte at a time: " << text;
  for (uint32_t seed = 0; seed < 8; ++seed) {
    EXPECT_TRUE(run_pieces(s, split_random(text, seed)) == whole) << "random chunks, seed " << seed << ": " << text;
  }
  return whole;
}

}  // namespace strata::chat::testing
