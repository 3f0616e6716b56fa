// What a tensor group's nodes do together after each sliced sub-layer: add their partial results.
// The model layer only sees this interface; net/ implements it over authenticated TCP links between
// the nodes, tests over threads.
#pragma once

#include <cstdint>

#include "base/result.h"

namespace strata::model {

// Work a member can do while an exchange waits for the others (model/weight_warmer.h): each step()
// does a few microseconds of it and says whether more is left.
class IdleWork {
 public:
  virtual ~IdleWork() = default;
  virtual bool step() = 0;
};

class Collective {
 public:
  virtual ~Collective() = default;
  // data (n floats, the same n on every member) becomes the sum of every member's data, added in
  // member order, so every member ends with the same bits whatever the timing. While it waits it runs
  // `idle` (when given) until that has nothing left. After a failure every later call returns at once
  // and error() names what failed; the batch's results are then void.
  virtual void all_reduce_sum(float* data, int64_t n, IdleWork* idle = nullptr) = 0;
  virtual Status error() const = 0;
};

}  // namespace strata::model
