#include "tensor/aligned_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string_view>

namespace strata::tensor {

void AlignedFree::operator()(uint8_t* p) const {
  if (mapped) ::munmap(p, mapped);
  else ::operator delete[](p, std::align_val_t{64});
}

// Maps a little more than asked and trims it to whole 2 MiB pages on a 2 MiB boundary, so that the
// kernel can back all of it with huge pages (where it has them; otherwise 4 KiB pages, as before).
AlignedBuffer aligned_buffer(size_t bytes) {
  if (bytes >= kHugePage && bytes <= (size_t{1} << 46)) {
    const size_t n = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* raw = ::mmap(nullptr, n + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto base = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
    if (start > base) ::munmap(raw, start - base);
    if (const size_t tail = base + kHugePage - start) ::munmap(reinterpret_cast<void*>(start + n), tail);
    static const bool off = [] {
      const char* e = std::getenv("STRATA_HUGE_PAGES");
      return e && std::string_view(e) == "off";
    }();
    if (!off) ::madvise(reinterpret_cast<void*>(start), n, MADV_HUGEPAGE);
    return AlignedBuffer(reinterpret_cast<uint8_t*>(start), AlignedFree{n});
  }
  return AlignedBuffer(static_cast<uint8_t*>(::operator new[](std::max<size_t>(bytes, 1), std::align_val_t{64})));
}

}  // namespace strata::tensor
