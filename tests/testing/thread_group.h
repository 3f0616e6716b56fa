// Members of an in-process tensor group on threads: a model::Collective that meets at a barrier,
// reads every member's buffer and adds them in member order (the contract the data links keep).
#pragma once

#include <barrier>
#include <vector>

#include "model/collective.h"

namespace strata::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int32_t n) : barrier_(n), data_(n) {}

  class Member final : public model::Collective {
   public:
    Member(ThreadGroup& g, int32_t index) : g_(g), index_(index) {}
    void all_reduce_sum(float* data, int64_t n, model::IdleWork* idle = nullptr) override {
      g_.data_[index_] = data;
      while (idle && idle->step()) {
      }
      g_.barrier_.arrive_and_wait();
      sum_.assign(g_.data_[0], g_.data_[0] + n);
      for (size_t m = 1; m < g_.data_.size(); ++m) {
        for (int64_t i = 0; i < n; ++i) sum_[i] += g_.data_[m][i];
      }
      g_.barrier_.arrive_and_wait();  // nobody writes before everybody has read
      std::copy(sum_.begin(), sum_.end(), data);
    }
    Status error() const override { return {}; }

   private:
    ThreadGroup& g_;
    int32_t index_;
    std::vector<float> sum_;
  };

 private:
  std::barrier<> barrier_;
  std::vector<float*> data_;
};

}  // namespace strata::testing
