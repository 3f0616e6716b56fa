// Error codes: make_error with and without a code, with_code keeping a deeper code, propagation.
#include <gtest/gtest.h>

#include "base/result.h"

namespace strata {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return make_error(ErrorCode::kInvalidArgument, "{} is not positive", v);
  return v;
}

Status twice(int v) {
  STRATA_ASSIGN(int x, parse_positive(v));
  if (x > 100) return make_error("{} is too big", x);
  return ok_status();
}

TEST(Result, make_error_formats_with_or_without_a_code) {
  const Error plain = make_error("bad field {}", "x");
  EXPECT_EQ(plain.code, ErrorCode::kUnknown);
  EXPECT_EQ(plain.message, "bad field x");
  const Error coded = make_error(ErrorCode::kNotFound, "no tensor {} in {}", "a", 3);
  EXPECT_EQ(coded.code, ErrorCode::kNotFound);
  EXPECT_EQ(coded.message, "no tensor a in 3");
  EXPECT_EQ(make_error(ErrorCode::kInternal, "plain text").message, "plain text");
}

TEST(Result, codes_survive_propagation) {
  auto s = twice(-1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message, "-1 is not positive");
  auto big = twice(200);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kUnknown);
  EXPECT_TRUE(twice(5).ok());
}

TEST(Result, with_code_fills_only_an_unknown_code) {
  EXPECT_EQ(with_code(make_error("x"), ErrorCode::kUnavailable).code, ErrorCode::kUnavailable);
  EXPECT_EQ(with_code(make_error(ErrorCode::kSplitLayer, "x"), ErrorCode::kInvalidArgument).code,
            ErrorCode::kSplitLayer);
}

TEST(Result, every_code_has_a_name) {
  EXPECT_EQ(error_code_name(ErrorCode::kPlacementRefused), "placement refused");
  EXPECT_EQ(error_code_name(ErrorCode::kUnavailable), "unavailable");
  EXPECT_EQ(error_code_name(ErrorCode::kUnknown), "unknown");
}

}  // namespace
}  // namespace strata
