// Reading values and arrays from bytes that come from outside (a file, a network message), where
// every length is checked against what is left before anything is allocated. The source says how
// many bytes are left and copies the next n of them (it is never asked for more than are left).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace strata {

template <typename Source>  // Status read(void* out, uint64_t n); uint64_t left() const
class BoundedReader {
 public:
  BoundedReader(Source source, std::string what) : source_(std::move(source)), what_(std::move(what)) {}

  Status bytes(void* out, uint64_t n) {
    if (n > source_.left()) return make_error("{}: {} bytes needed, {} left", what_, n, source_.left());
    if (n == 0) return {};  // an empty vector's data() may be null, which memcpy must not get
    return source_.read(out, n);
  }
  template <typename T>
  Result<T> value() {
    T v{};
    STRATA_TRY(bytes(&v, sizeof v));
    return v;
  }
  // `count` items of T; a count longer than the bytes left is refused before the allocation.
  template <typename T>
  Result<std::vector<T>> items(uint64_t count) {
    if (count > source_.left() / sizeof(T)) return make_error("{}: {} items are longer than the data", what_, count);
    std::vector<T> v(static_cast<size_t>(count));
    STRATA_TRY(bytes(v.data(), count * sizeof(T)));
    return v;
  }
  // A u64 count, then that many items.
  template <typename T>
  Result<std::vector<T>> counted() {
    STRATA_ASSIGN(const uint64_t n, value<uint64_t>());
    return items<T>(n);
  }
  uint64_t left() const { return source_.left(); }

 private:
  Source source_;
  std::string what_;
};

}  // namespace strata
