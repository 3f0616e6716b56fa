// Shared helpers for the tokenizer tests: loading vocabularies from ../shared and reading llama.cpp's
// test-tokenizer-0 vectors.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "testing/shared_data.h"
#include "text/vocab.h"

namespace strata::text::testing_util {

// Loads the vocab of a GGUF file under shared/; nullptr plus a test failure when that fails.
inline std::shared_ptr<const Vocab> load_shared_vocab(const std::string& relative) {
  const std::string path = ::strata::testing::shared_file(relative);
  if (path.empty()) return nullptr;
  auto file = gguf::File::open(path);
  if (!file.ok()) {
    ADD_FAILURE() << file.error().message;
    return nullptr;
  }
  auto vocab = Vocab::load(*file.value());
  if (!vocab.ok()) {
    ADD_FAILURE() << vocab.error().message;
    return nullptr;
  }
  return vocab.value();
}

// The test strings of a .inp file: joined by "\n__ggml_vocab_test__\n", usually with one more
// separator at the very end (gemma-4's file has none).
inline std::vector<std::string> split_inp(const std::string& content) {
  static const std::string kSep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t start = 0;
  while (true) {
    const size_t at = content.find(kSep, start);
    if (at == std::string::npos) {
      if (start < content.size()) cases.push_back(content.substr(start));
      break;
    }
    cases.push_back(content.substr(start, at - start));
    start = at + kSep.size();
  }
  return cases;
}

// The expected ids of a .out file: one line per case, ids separated by spaces.
inline std::vector<std::vector<Token>> parse_out(const std::string& content) {
  std::vector<std::vector<Token>> rows;
  std::istringstream lines(content);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ids(line);
    std::vector<Token> row;
    Token id;
    while (ids >> id) row.push_back(id);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace strata::text::testing_util
