// The roofline's bandwidth probe (runtime::measure_read_bandwidth): it refuses arguments it cannot
// honour, naming them, and on a small buffer returns a positive, finite rate (its speed is not
// checked: the machine may be loaded).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "runtime/bench.h"

namespace strata::runtime {
namespace {

TEST(BandwidthProbe, RefusesThreadsBytesAndRunsOutOfRange) {
  const struct {
    int32_t threads;
    uint64_t bytes;
    int32_t runs;
    const char* names;
  } bad[] = {{0, 1 << 20, 1, "threads"},       {1025, 1 << 20, 1, "threads"}, {1, 1000, 1, "bytes"},
             {1, uint64_t{65} << 30, 1, "bytes"}, {1, 1 << 20, 0, "runs"},      {1, 1 << 20, 1001, "runs"}};
  for (const auto& b : bad) {
    const auto r = measure_read_bandwidth(b.threads, b.bytes, b.runs);
    ASSERT_FALSE(r.ok()) << b.names;
    EXPECT_NE(r.error().message.find(b.names), std::string::npos) << r.error().message;
  }
}

TEST(BandwidthProbe, ReadsASmallBufferOnEveryThread) {
  for (int32_t threads : {1, 3}) {
    const auto r = measure_read_bandwidth(threads, uint64_t{3} << 20, 2);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_GT(*r, 0.0);
    EXPECT_TRUE(std::isfinite(*r));
  }
}

}  // namespace
}  // namespace strata::runtime
