// Block formats: dequantization, activation quantization and dot products, with a scalar reference
// for every type and SIMD kernels (AVX2, AVX-512) for the hot ones, chosen at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/dtype.h"

namespace strata::tensor {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };
std::string_view isa_name(Isa isa);
Isa best_isa();  // from CPU features at run time

// The format activations are converted to before a dot product with weights of type `w`
// (llama.cpp's vec_dot_type): F32->F32, F16->F16, BF16->BF16, Q4_0/Q5_0/Q8_0/IQ4_NL->Q8_0,
// Q4_1/Q5_1->Q8_1, K-quants and IQ4_XS->Q8_K.
DType vec_dot_type(DType w);

// Dequantizes n elements (a multiple of the block size) starting at src.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Converts an f32 activation row to `format` (one of the vec_dot types). n is a multiple of the
// format's block size. Q8_0 follows llama.cpp's x86 path (scale 127/amax, round to nearest even) on
// every ISA so that results do not depend on the machine.
void quantize_activations(DType format, const float* x, void* dst, int64_t n);

// Dot product of one weight row (type w) with one activation row in vec_dot_type(w).
using VecDotFn = float (*)(int64_t n, const void* w, const void* a);
VecDotFn vec_dot_fn(DType w);            // best kernel for this CPU; null if w is unsupported
VecDotFn vec_dot_fn(DType w, Isa isa);   // a specific ISA's kernel; null if it has none for w
                                         // or the CPU lacks the ISA

// Several weight rows times several activation rows (prompt processing):
//   y[t * y_stride + r] = vec_dot_fn(w, isa)(n, w + r * w_stride, a + t * a_stride)
// for r < rows, t < tokens, bit for bit: each output goes through the same arithmetic as the
// single-row kernel, but each weight block is unpacked once per tile of tokens.
using VecDotTileFn = void (*)(int64_t n, const void* w, size_t w_stride, int64_t rows, const void* a,
                              size_t a_stride, int64_t tokens, float* y, int64_t y_stride);
VecDotTileFn vec_dot_tile_fn(DType w, Isa isa);  // null if that ISA has no tiled kernel for w
VecDotTileFn vec_dot_tile_fn(DType w);           // matches vec_dot_fn(w); null: use one dot per output

}  // namespace strata::tensor
