// Public entry points: ISA detection, vec_dot_type, and run-time kernel selection.
#include "tensor/quants.h"

#include <cstdlib>
#include <cstring>

#include "base/system.h"
#include "tensor/blocks.h"

namespace strata::tensor {
namespace detail {

bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           cpu_has_f16c();
  }();
  return has;
}

bool cpu_has_avx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
  }();
  return has;
}

bool cpu_has_avx512_vnni() {
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx512() && __builtin_cpu_supports("avx512vnni");
  }();
  return has;
}

}  // namespace detail

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

namespace {

bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return detail::cpu_has_avx2();
    case Isa::Avx512: return detail::cpu_has_avx512();
  }
  return false;
}

// STRATA_MAX_ISA=scalar|avx2|avx512 caps the automatic choice (for debugging and comparisons).
Isa detect_best() {
  Isa best = Isa::Scalar;
  if (detail::cpu_has_avx2()) best = Isa::Avx2;
  if (detail::cpu_has_avx512()) best = Isa::Avx512;
  if (const char* cap = std::getenv("STRATA_MAX_ISA")) {
    Isa limit = best;
    if (std::strcmp(cap, "scalar") == 0) limit = Isa::Scalar;
    if (std::strcmp(cap, "avx2") == 0) limit = Isa::Avx2;
    if (static_cast<int>(limit) < static_cast<int>(best)) best = limit;
  }
  return best;
}

}  // namespace

Isa best_isa() {
  static const Isa isa = detect_best();
  return isa;
}

DType vec_dot_type(DType w) {
  switch (w) {
    case DType::F32: return DType::F32;
    case DType::F16: return DType::F16;
    case DType::BF16: return DType::BF16;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::MXFP4:
    case DType::NVFP4:
    case DType::Q1_0:
    case DType::Q2_0: return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1: return DType::Q8_1;
    case DType::I8:
    case DType::I16:
    case DType::I32:
    case DType::I64:
    case DType::F64:
    case DType::Q8_1:
    case DType::Q8_K: return w;  // no dot product; listed for completeness
    default: return DType::Q8_K;  // K-quants, IQ*, TQ*
  }
}

VecDotFn vec_dot_fn(DType w, Isa isa) {
  switch (isa) {
    case Isa::Scalar: return detail::scalar_vec_dot(w);
    case Isa::Avx2: return cpu_supports(isa) ? detail::avx2_vec_dot(w) : nullptr;
    case Isa::Avx512:
      return cpu_supports(isa) ? detail::avx512_vec_dot(w, detail::cpu_has_avx512_vnni()) : nullptr;
  }
  return nullptr;
}

VecDotFn vec_dot_fn(DType w) {
  for (int i = static_cast<int>(best_isa()); i >= 0; --i) {
    if (VecDotFn fn = vec_dot_fn(w, static_cast<Isa>(i))) return fn;
  }
  return nullptr;
}

VecDotTileFn vec_dot_tile_fn(DType w, Isa isa) {
  switch (isa) {
    case Isa::Scalar: return nullptr;
    case Isa::Avx2: return cpu_supports(isa) ? detail::avx2_vec_dot_tile(w) : nullptr;
    case Isa::Avx512:
      return cpu_supports(isa) ? detail::avx512_vec_dot_tile(w, detail::cpu_has_avx512_vnni()) : nullptr;
  }
  return nullptr;
}

// The tile kernel must belong to the same ISA as the dot kernel vec_dot_fn(w) picks, so that a
// prompt and the same tokens one at a time give identical outputs.
VecDotTileFn vec_dot_tile_fn(DType w) {
  for (int i = static_cast<int>(best_isa()); i >= 0; --i) {
    if (vec_dot_fn(w, static_cast<Isa>(i))) return vec_dot_tile_fn(w, static_cast<Isa>(i));
  }
  return nullptr;
}

}  // namespace strata::tensor
