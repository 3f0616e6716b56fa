// Weights repacked at load for the prompt GEMM: groups of 16 rows interleaved so that one 64-byte
// load holds 4 consecutive elements of each of the 16 rows, and vpdpbusd against 4 broadcast
// activation bytes adds one product of 4 elements to each row's lane (on AVX2, vpmaddubsw on each
// 32-byte half of 8 rows, then vpmaddwd; the same integers). Scales are unpacked to bytes
// beside the quants. The same kernel runs one token (decode) and tiles of up to 8 tokens (prompts):
// each output is the same integer sums and the same float operations in the same order, so results
// depend neither on the batch nor on the thread count. Used for Q4_0, Q8_0, Q4_K, Q5_K and Q6_K
// matrices whose row count is a multiple of 16, on CPUs with AVX-512 VNNI or AVX2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "tensor/matmul.h"

namespace strata::tensor {

inline constexpr int64_t kRepackRows = 16;

// Whether w can be repacked on this machine (type, shape, CPU) and STRATA_NO_REPACK is unset.
bool repackable(const MatrixView& w);
// Bytes per row of the repacked form (a group of 16 rows takes 16 times this); 0 if the type has none.
// K-quants grow by 2.2-2.8% (scales unpacked to bytes); Q4_0 and Q8_0 keep their size.
size_t repacked_row_bytes(DType type, int64_t cols);
// Whether a matrix of this type and shape repacks where the kernels repack at all: the same rule on
// every CPU (whole 16-row groups, whole blocks, a type with a repacked form). For memory planning.
bool repack_shape(DType type, int64_t rows, int64_t cols);
// Whether this process repacks: a 16-row kernel for its ISA (AVX2, or AVX-512 VNNI) within
// STRATA_MAX_ISA, and STRATA_NO_REPACK unset. Nodes report it (kernel_features) to the planner.
bool this_cpu_repacks();
// Both: this process would repack such a matrix.
bool repacks(DType type, int64_t rows, int64_t cols);
// The CPU features this process's kernels use (base::cpu_features within STRATA_MAX_ISA), and
// "repack" when this_cpu_repacks(): what a node tells the planner about its kernels.
std::vector<std::string> kernel_features();
inline constexpr std::string_view kRepackFeature = "repack";

// Writes w (row-major GGUF blocks, repackable) into dst (w.rows * repacked_row_bytes bytes) and
// returns the view of dst. Groups [g0, g1) only, so callers can split the work over threads.
MatrixView repack_groups(const MatrixView& w, uint8_t* dst, int64_t g0, int64_t g1);
MatrixView repacked_view(const MatrixView& w, const uint8_t* dst);

// Row r of a repacked matrix back in its GGUF block form (row_bytes(type, cols) bytes at out).
void unpack_row(const MatrixView& w, int64_t r, uint8_t* out);

// One-token products of repacked matrices stream every weight once from memory. Asking for the
// bytes 4 KB ahead in software sped that up on one host and halved it on another, so the process
// measures it on its own weights (calibrate_decode_prefetch) and keeps the faster. Either way every
// output is the same bits.
void set_decode_prefetch(bool on);
struct PrefetchChoice {
  bool on = true;
  double gbps_with = 0, gbps_without = 0;  // best of the timed passes
  bool measured = false;                   // timed (not forced, w large enough)
  bool forced = false;                     // set by STRATA_DECODE_PREFETCH=on|off
};
// Times one-token products of (up to 64 MiB of) the repacked w with and without software prefetch,
// interleaved, and sets the faster. STRATA_DECODE_PREFETCH=on|off sets it without measuring (and
// is the setting before any calibration, e.g. in the kernel benchmarks); a
// matrix under 16 MiB (it would sit in cache) leaves the setting as it is.
PrefetchChoice calibrate_decode_prefetch(const MatrixView& w, ThreadPool& pool);

}  // namespace strata::tensor
