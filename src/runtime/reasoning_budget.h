// llama-server's --reasoning-budget: once a generation has written `tokens` tokens inside its think
// block, the budget message and the closing tag are written for it, token by token, and the answer
// follows. The tracker reads the generated text, so it works whether the prompt opened the block or
// the model did.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/vocab.h"

namespace strata::runtime {

struct ReasoningBudgetParams {
  int32_t tokens = -1;         // < 0: no budget
  bool starts_inside = false;  // the prompt ends inside an open think block
  std::string open, close;     // the think tags
  std::vector<text::Token> forced;  // the budget message then `close`, tokenized
};

class ReasoningBudget {
 public:
  explicit ReasoningBudget(ReasoningBudgetParams params);
  // The token to write next instead of sampling one (advancing through `forced`), or -1.
  text::Token take_forced();
  // The forced text cannot be written (a grammar refuses it): sampling goes on as before.
  void abandon() { forcing_ = false; }
  // Every generated token's text, in order.
  void accepted(std::string_view piece);
  bool exhausted() const { return spent_; }

 private:
  enum class State { kBefore, kInside, kAfter };
  ReasoningBudgetParams params_;
  State state_ = State::kAfter;
  std::string tail_;  // the text not yet known to be outside a tag
  int32_t used_ = 0;
  bool spent_ = false, forcing_ = false;
  size_t next_forced_ = 0;
};

}  // namespace strata::runtime
