// tensor::aligned_buffer: where the bytes start and what backs them.
#include <gtest/gtest.h>

#include <cstdint>

#include "tensor/aligned_buffer.h"

namespace strata::tensor {
namespace {

// Small buffers come from the heap 64-byte aligned; large ones are 2 MiB-aligned mappings of whole
// huge pages (for the kernel to back with them); both hold what is written and free cleanly.
TEST(AlignedBuffer, small_ones_are_64_byte_aligned_large_ones_start_on_a_huge_page) {
  for (size_t bytes : {size_t{1}, size_t{4096}, kHugePage - 1, kHugePage, kHugePage + 1, 5 * kHugePage + 123}) {
    AlignedBuffer b = aligned_buffer(bytes);
    const auto at = reinterpret_cast<uintptr_t>(b.get());
    EXPECT_EQ(at % 64, 0u) << bytes;
    EXPECT_EQ(at % kHugePage == 0, bytes >= kHugePage) << bytes;
    EXPECT_EQ(b.get_deleter().mapped, bytes >= kHugePage ? (bytes + kHugePage - 1) / kHugePage * kHugePage : 0) << bytes;
    b[bytes - 1] = 2, b[0] = 1;
    EXPECT_EQ(b[0], 1);
    EXPECT_EQ(b[bytes - 1], bytes == 1 ? 1 : 2);
  }
}

}  // namespace
}  // namespace strata::tensor
