// One decode call's tokens: ids, positions, sequences, and which rows need logits.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::model {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;
  std::vector<int32_t> seq;
  std::vector<uint8_t> logits;  // 1: return this row's logits

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  void add(int32_t token, int32_t position, int32_t sequence, bool want_logits) {
    tokens.push_back(token);
    pos.push_back(position);
    seq.push_back(sequence);
    logits.push_back(want_logits ? 1 : 0);
  }
  void clear() { tokens.clear(), pos.clear(), seq.clear(), logits.clear(); }
};

}  // namespace strata::model
