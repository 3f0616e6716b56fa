#include "text/builtin_vocab.h"

#include <fmt/core.h>

#include <set>
#include <sstream>

namespace strata::text {
namespace {

constexpr const char* kWords =
    "the a an and to of in on was is it he she they his her said with for that at one day there once upon time "
    "little big girl boy named lily tom ben sue mom dad went saw play played park ball tree sun sky happy sad "
    "friend friends dog cat bird fish house home wanted very good bad went ran jumped looked found had have "
    "not but so then when what who up down out into over under red blue green yellow toy toys car cake "
    "water pond flower garden school book story run fun love loved help helped";

}  // namespace

VocabTables builtin_vocab() {
  VocabTables v;
  auto add = [&](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0.0f, TokenType::Unknown);
  add("<s>", 0.0f, TokenType::Control);
  add("</s>", 0.0f, TokenType::Control);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0.0f, TokenType::Byte);
  const std::string space = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  std::set<std::string> seen;
  auto add_piece = [&](const std::string& piece, float score) {
    if (seen.insert(piece).second) add(piece, score, TokenType::Normal);
  };
  add_piece(space, -1.0f);
  for (char c = 33; c < 127; ++c) add_piece(std::string(1, c), -1.0f);
  std::istringstream words(kWords);
  std::string word;
  while (words >> word) {
    const std::string full = space + word;
    // Every prefix, so that pairwise merges can build the word; longer pieces score higher.
    for (size_t n = space.size() + 1; n <= full.size(); ++n) add_piece(full.substr(0, n), static_cast<float>(n));
  }
  return v;
}

}  // namespace strata::text
