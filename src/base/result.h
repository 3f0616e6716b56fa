// Errors as values: Result<T> holds a T or an Error; Status is Result<void>.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace strata {

// What kind of failure an Error is, for callers that act on it (exit statuses, HTTP statuses,
// retries) without reading the message.
enum class ErrorCode {
  kUnknown,            // not classified (make_error without a code)
  kInvalidArgument,    // bad flags, fields or requests
  kNotFound,
  kOutOfRange,         // e.g. a prompt longer than the context
  kResourceExhausted,  // e.g. a plan over a node's memory limit
  kUnavailable,        // a worker is down or unreachable; the server is stopping
  kDeadlineExceeded,
  kPermissionDenied,   // a worker refused the token or certificate
  kPlacementRefused,   // --strict-placement: -ot pins contradict -ts/-ngl (the CLI exits with 2)
  kSplitLayer,         // -ot pins split one layer's weights across nodes
  kInternal,
};

std::string_view error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kUnknown;
  std::string message;
};

// Builds an Error with fmt-style formatting: make_error("{}: bad field {}", file, key).
template <typename... Args>
Error make_error(fmt::format_string<Args...> format, Args&&... args) {
  return Error{ErrorCode::kUnknown, fmt::format(format, std::forward<Args>(args)...)};
}

// The same with a code: make_error(ErrorCode::kNotFound, "no tensor {}", name). Unambiguous with the
// overload above: an enum never converts to a format string.
template <typename... Args>
Error make_error(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Error{code, fmt::format(format, std::forward<Args>(args)...)};
}

// `e` with `code` unless it already has one (a deeper, more precise code wins).
inline Error with_code(Error e, ErrorCode code) {
  if (e.code == ErrorCode::kUnknown) e.code = code;
  return e;
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const& { return *error_; }
  Error&& error() && { return std::move(*error_); }

 private:
  std::optional<Error> error_;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

}  // namespace strata

// Propagates an error from an expression returning Result/Status.
#define STRATA_CONCAT_INNER(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_INNER(a, b)
#define STRATA_TRY(expr)                                    \
  do {                                                      \
    auto strata_try_status_ = (expr);                       \
    if (!strata_try_status_.ok()) return std::move(strata_try_status_).error(); \
  } while (0)
// STRATA_ASSIGN(auto x, expr): declares x from a Result's value or returns its error.
#define STRATA_ASSIGN(decl, expr) STRATA_ASSIGN_IMPL(STRATA_CONCAT(strata_result_, __LINE__), decl, expr)
#define STRATA_ASSIGN_IMPL(tmp, decl, expr)            \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).error();        \
  decl = std::move(tmp).value()
