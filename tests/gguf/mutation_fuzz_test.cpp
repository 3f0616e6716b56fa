// Randomized mutations of a small valid file (fixed seed, so failures reproduce). The reader must
// either refuse the file with a message or accept it with a consistent header; under ASan/UBSan any
// out-of-bounds read or overflow in the parser or the getters stops the test.
#include <chrono>
#include <random>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace strata::gguf {
namespace {

using testing::Bytes;

// Values that tend to hit boundaries in counts, lengths, offsets and type ids.
constexpr uint64_t kInteresting[] = {
    0, 1, 2, 3, 4, 5, 9, 13, 31, 32, 33, 63, 64, 255, 256, 4096, 0x7fffffff, 0x80000000, 0xffffffff,
    uint64_t{1} << 30, (uint64_t{1} << 30) + 1, uint64_t{1} << 32, uint64_t{1} << 62, 0x7fffffffffffffff,
    0x8000000000000000, 0xffffffffffffffff,
};

Bytes mutate(const Bytes& base, std::mt19937_64& rng) {
  Bytes b = base;
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : static_cast<uint64_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(pick(3));
  for (int e = 0; e < edits && !b.empty(); ++e) {
    switch (pick(7)) {
      case 0:  // random byte
        b[pick(b.size())] = static_cast<uint8_t>(rng());
        break;
      case 1:  // bit flip
        b[pick(b.size())] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      case 2:    // boundary value as a u64/u32/i32 at any position (fields are unaligned)
      case 3: {
        const uint64_t v = kInteresting[pick(std::size(kInteresting))];
        const size_t width = pick(2) ? 8 : 4;
        if (b.size() < width) break;
        const uint64_t at = pick(b.size() - width + 1);
        std::memcpy(b.data() + at, &v, width);
        break;
      }
      case 4:  // truncate
        b.resize(pick(b.size() + 1));
        break;
      case 5: {  // delete a range
        const uint64_t at = pick(b.size());
        const uint64_t n = 1 + pick(16);
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                b.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(b.size(), at + n)));
        break;
      }
      case 6: {  // insert random bytes
        const uint64_t at = pick(b.size() + 1);
        Bytes junk(1 + pick(16));
        for (auto& x : junk) x = static_cast<uint8_t>(rng());
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), junk.begin(), junk.end());
        break;
      }
    }
  }
  return b;
}

// Touches everything an accepted file exposes, so ASan sees every pointer the reader handed out.
uint64_t exercise(const File& f) {
  uint64_t sum = 0;
  const uint8_t* begin = f.bytes().data();
  const uint8_t* end = begin + f.bytes().size();
  for (const TensorInfo& t : f.tensors()) {
    const uint8_t* p = f.tensor_data(t);
    EXPECT_TRUE(p >= begin && p + t.nbytes <= end) << t.name;
    for (uint64_t k = 0; k < t.nbytes; k += 7) sum += p[k];
    sum += static_cast<uint64_t>(t.n_elements());
  }
  for (const KeyValue& kv : f.kvs()) {
    sum += f.get_int(kv.key).ok() + f.get_u32(kv.key).ok() + f.get_f32(kv.key).ok() + f.get_bool(kv.key).ok();
    if (auto s = f.get_string(kv.key); s.ok()) sum += s->size();
    if (auto a = f.get_int_array(kv.key); a.ok()) sum += a->size();
    if (auto a = f.get_f32_array(kv.key); a.ok()) sum += a->size();
    if (auto a = f.get_string_array(kv.key); a.ok()) {
      for (std::string_view s : *a) {
        EXPECT_TRUE(reinterpret_cast<const uint8_t*>(s.data()) >= begin &&
                    reinterpret_cast<const uint8_t*>(s.data()) + s.size() <= end);
        sum += s.size();
      }
    }
  }
  return sum;
}

TEST(MutationFuzz, random_mutations_of_a_small_file_never_crash) {
  const Bytes base = testing::small_file();
  ASSERT_FALSE(base.empty());
  std::mt19937_64 rng(0x5eed'6775'6600ull);
  const auto start = std::chrono::steady_clock::now();
  int accepted = 0, refused = 0;
  uint64_t sink = 0;
  constexpr int kIterations = 10000;
  for (int i = 0; i < kIterations; ++i) {
    const Bytes bytes = mutate(base, rng);
    auto file = File::from_bytes(bytes, "fuzz.gguf");
    if (file.ok()) {
      ++accepted;
      sink += exercise(**file);
    } else {
      ++refused;
      EXPECT_EQ(file.error().message.rfind("fuzz.gguf: ", 0), 0u) << file.error().message;
    }
    if (HasFailure()) {
      ADD_FAILURE() << "first failure at iteration " << i;
      return;
    }
    // Keep the suite fast even on a slow sanitizer build.
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(4)) break;
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(accepted, 0);  // some mutations (e.g. in tensor data or string bytes) keep the file valid
  ::testing::Test::RecordProperty("accepted", accepted);
  ::testing::Test::RecordProperty("refused", refused);
  EXPECT_NE(sink, 1u);  // keeps `sink` observable
}

}  // namespace
}  // namespace strata::gguf
