// Byte buffers for weights that one-token products stream: 64-byte aligned, and from 2 MiB on
// mappings of their own in 2 MiB pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace strata::tensor {

// From 2 MiB on they are mappings of their own asking for 2 MiB pages (MADV_HUGEPAGE): one-token
// products stream the weights (sliced and repacked views, the speed probe's matrices), and with
// 4 KiB pages every 4 KiB costs a page walk (decode gains: bench/README.md).
// STRATA_HUGE_PAGES=off leaves them to the kernel's default (where a huge page's first fault is dear).
struct AlignedFree {
  size_t mapped = 0;  // bytes of the mapping; 0: from operator new
  void operator()(uint8_t* p) const;
};
using AlignedBuffer = std::unique_ptr<uint8_t[], AlignedFree>;
inline constexpr size_t kHugePage = size_t{2} << 20;
AlignedBuffer aligned_buffer(size_t bytes);

}  // namespace strata::tensor
