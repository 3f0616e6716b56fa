// What a tensor group's nodes do together after each sliced sub-layer: add their partial results.
// The model layer only sees this interface; net/ implements it over authenticated TCP links between
// the nodes, tests over threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

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

  // Whole messages between two members, in order with the exchanges: how a coordinator that is member
  // 0 hands the others each batch and hears their results without a call per token. receive_message
  // waits until the collective's deadline, or with `stop` until that turns true, and refuses a message
  // over max_bytes. Not every collective carries them.
  virtual Status send_message(int32_t /*to*/, std::string_view /*bytes*/) {
    return make_error("this collective carries no messages");
  }
  virtual Result<std::string> receive_message(int32_t /*from*/, size_t /*max_bytes*/,
                                              const std::atomic<bool>* /*stop*/ = nullptr) {
    return make_error("this collective carries no messages");
  }
};

}  // namespace strata::model
