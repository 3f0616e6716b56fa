// JsonScanner against nlohmann::json as the reference: it accepts exactly the texts nlohmann
// accepts, and at every prefix of a valid document its release point closes into valid JSON.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

#include "chat/json_scan.h"

namespace strata::chat {
namespace {

using nlohmann::json;

// Feeds the whole text; true when it is one complete JSON value (and nothing but whitespace after).
bool scanner_accepts(const std::string& text) {
  JsonScanner s;
  size_t i = 0;
  for (; i < text.size(); ++i) {
    JsonScanner::Step st = s.feed(text[i]);
    if (st == JsonScanner::Step::kError) return false;
    if (st == JsonScanner::Step::kEnd) break;
  }
  bool done = s.finish();
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') return false;
  }
  return done;
}

json random_value(std::mt19937& rng, int depth) {
  switch (rng() % (depth > 3 ? 5 : 7)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int>(rng() % 2000) - 1000;
    case 3: return (static_cast<double>(rng() % 100000) - 50000) / 7.0;
    case 4: {
      static const std::vector<std::string> parts = {"a", "é", "😀", "\"", "\\", "\n", "\t", "x y", "\u0001", "</p>"};
      std::string s;
      for (size_t n = rng() % 5; n > 0; --n) s += parts[rng() % parts.size()];
      return s;
    }
    case 5: {
      json a = json::array();
      for (size_t n = rng() % 4; n > 0; --n) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (size_t n = rng() % 4; n > 0; --n) o["k" + std::to_string(rng() % 10)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

TEST(JsonScanner, every_prefix_of_a_document_closes_into_valid_json_at_its_release_point) {
  std::mt19937 rng(11);
  for (int doc = 0; doc < 300; ++doc) {
    json v = json::object();
    v["a"] = random_value(rng, 0);
    v["b"] = random_value(rng, 0);
    std::string text = v.dump(doc % 2 ? 1 : -1);
    JsonScanner s;
    for (size_t i = 0; i < text.size(); ++i) {
      JsonScanner::Step st = s.feed(text[i]);
      ASSERT_NE(st, JsonScanner::Step::kError) << text << " at " << i;
      ASSERT_LE(s.release_size(), i + 1);
      std::string closed = text.substr(0, s.release_size()) + s.release_closers();
      ASSERT_TRUE(json::accept(closed)) << closed;
      if (i + 1 == text.size()) {
        EXPECT_EQ(st, JsonScanner::Step::kDone);
      }
    }
    EXPECT_EQ(s.release_size(), text.size());
  }
}

TEST(JsonScanner, accepts_exactly_what_nlohmann_accepts) {
  std::mt19937 rng(5);
  const std::vector<std::string> pieces = {"{", "}", "[", "]", "\"", "\\", ",", ":", " ", "1", "0", "-", ".", "e",
                                           "+", "true", "fals", "null", "\"k\"", "\\u00e9", "\\x", "é", "\n", "01"};
  int agreed_valid = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    for (size_t n = 1 + rng() % 8; n > 0; --n) text += pieces[rng() % pieces.size()];
    bool ref = json::accept(text);
    EXPECT_EQ(scanner_accepts(text), ref) << text;
    agreed_valid += ref;
  }
  EXPECT_GT(agreed_valid, 100);
  for (std::string ok : {"0", "-0.5e+3", "[]", "{}", "\"a\\u00E9\\n\"", "[1,[2,{\"a\":null}]]", " true "}) {
    EXPECT_TRUE(scanner_accepts(ok)) << ok;
  }
  for (std::string bad : {"01", "1.", "-", "[1,]", "{\"a\"}", "{\"a\":}", "\"\x01\"", "[1 2]", "tru", "\"\\q\""}) {
    EXPECT_FALSE(scanner_accepts(bad)) << bad;
  }
}

TEST(JsonScanner, nesting_is_bounded) {
  JsonScanner s;
  JsonScanner::Step st = JsonScanner::Step::kMore;
  for (size_t i = 0; i <= JsonScanner::kMaxDepth && st != JsonScanner::Step::kError; ++i) st = s.feed('[');
  EXPECT_EQ(st, JsonScanner::Step::kError);
}

}  // namespace
}  // namespace strata::chat
