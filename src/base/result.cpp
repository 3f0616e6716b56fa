#include "base/result.h"

namespace strata {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kUnknown: return "unknown";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kOutOfRange: return "out of range";
    case ErrorCode::kResourceExhausted: return "resource exhausted";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kDeadlineExceeded: return "deadline exceeded";
    case ErrorCode::kPermissionDenied: return "permission denied";
    case ErrorCode::kPlacementRefused: return "placement refused";
    case ErrorCode::kSplitLayer: return "split layer";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace strata
