#include "runtime/reasoning_budget.h"

namespace strata::runtime {

ReasoningBudget::ReasoningBudget(ReasoningBudgetParams params) : params_(std::move(params)) {
  if (params_.tokens < 0 || params_.close.empty() || params_.forced.empty()) return;
  state_ = params_.starts_inside ? State::kInside : State::kBefore;
  if (state_ == State::kInside && params_.tokens == 0) spent_ = forcing_ = true;
}

text::Token ReasoningBudget::take_forced() {
  if (!forcing_) return -1;
  if (next_forced_ >= params_.forced.size()) {
    forcing_ = false;
    return -1;
  }
  return params_.forced[next_forced_++];
}

void ReasoningBudget::accepted(std::string_view piece) {
  if (state_ == State::kAfter) return;
  tail_ += piece;
  if (state_ == State::kBefore) {
    const size_t start = tail_.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) return;
    const std::string_view rest = std::string_view(tail_).substr(start);
    if (rest.size() < params_.open.size()) {
      if (params_.open.compare(0, rest.size(), rest) != 0) state_ = State::kAfter;  // no think block
      return;
    }
    if (rest.compare(0, params_.open.size(), params_.open) != 0) {
      state_ = State::kAfter;
      return;
    }
    tail_.erase(0, start + params_.open.size());
    state_ = State::kInside;
    if (params_.tokens == 0) spent_ = forcing_ = true;
    if (tail_.empty()) return;  // the opening tag's own token is not reasoning
  }
  if (tail_.find(params_.close) != std::string::npos) {
    state_ = State::kAfter;
    forcing_ = false;
    return;
  }
  if (tail_.size() >= params_.close.size()) tail_.erase(0, tail_.size() - (params_.close.size() - 1));
  if (!spent_ && ++used_ >= params_.tokens) spent_ = forcing_ = true;
}

}  // namespace strata::runtime
