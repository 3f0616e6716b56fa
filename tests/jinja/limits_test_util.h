// What the tests of hostile templates share (the Jinja limits and the chat templates under them).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace strata::testing {

// `s` written `n` times.
inline std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace strata::testing

#define EXPECT_ERROR_MENTIONS(message, needle) \
  EXPECT_NE((message).find(needle), std::string::npos) << "error was: " << (message)
