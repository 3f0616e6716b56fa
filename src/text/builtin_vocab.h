// A small SentencePiece-style vocabulary built into the binary, so that `strata synth` can write a
// runnable model without any downloaded tokenizer.
#pragma once

#include <string>
#include <vector>

#include "text/vocab.h"

namespace strata::text {

struct VocabTables {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // TokenType values
  Token bos = 1, eos = 2, unk = 0;
};

// <unk>, <s>, </s>, the 256 byte tokens, printable ASCII characters, then common English words with
// every prefix (so SentencePiece merges can reach them), scored so that longer pieces win.
VocabTables builtin_vocab();

}  // namespace strata::text
