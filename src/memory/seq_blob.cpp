#include "memory/seq_blob.h"

#include <cstring>
#include <string_view>

#include "base/bounded_reader.h"

namespace strata::memory {
namespace {

constexpr std::string_view kMagic = "STRATA-SEQ/1";

class Writer {
 public:
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  template <typename T>
  void value(T v) {
    bytes(&v, sizeof v);
  }
  void floats(const std::vector<float>& v) {
    value<uint64_t>(v.size());
    bytes(v.data(), v.size() * sizeof(float));
  }
  void raw(const std::vector<uint8_t>& v) {
    value<uint64_t>(v.size());
    bytes(v.data(), v.size());
  }
  void checkpoint(const StateCheckpoint& c) {
    value<int32_t>(c.pos);
    floats(c.conv);
    floats(c.ssm);
  }
  std::vector<uint8_t> out;
};

// Bytes in memory as a BoundedReader source.
struct SpanSource {
  std::span<const uint8_t> in;
  size_t at = 0;
  uint64_t left() const { return in.size() - at; }
  Status read(void* out, uint64_t n) {
    std::memcpy(out, in.data() + at, n);
    at += n;
    return {};
  }
};
using Reader = BoundedReader<SpanSource>;

Status read_checkpoint(Reader& r, StateCheckpoint& c) {
  STRATA_ASSIGN(c.pos, r.value<int32_t>());
  STRATA_ASSIGN(c.conv, r.counted<float>());
  STRATA_ASSIGN(c.ssm, r.counted<float>());
  return {};
}

}  // namespace

std::vector<uint8_t> encode_seq(const SeqBlob& blob) {
  Writer w;
  w.bytes(kMagic.data(), kMagic.size());
  w.value<int32_t>(blob.kv.n);
  w.raw(blob.kv.k);
  w.raw(blob.kv.v);
  w.value<uint8_t>(blob.state ? 1 : 0);
  if (blob.state) {
    w.checkpoint(blob.state->now);
    w.value<uint32_t>(static_cast<uint32_t>(blob.state->checkpoints.size()));
    for (const auto& c : blob.state->checkpoints) w.checkpoint(c);
  }
  return std::move(w.out);
}

Result<SeqBlob> decode_seq(std::span<const uint8_t> bytes) {
  Reader r(SpanSource{bytes}, "saved sequence");
  char magic[kMagic.size()];
  STRATA_TRY(r.bytes(magic, sizeof magic));
  if (std::string_view(magic, sizeof magic) != kMagic) return make_error("saved sequence: not a {} blob", kMagic);
  SeqBlob blob;
  STRATA_ASSIGN(blob.kv.n, r.value<int32_t>());
  STRATA_ASSIGN(blob.kv.k, r.counted<uint8_t>());
  STRATA_ASSIGN(blob.kv.v, r.counted<uint8_t>());
  STRATA_ASSIGN(const uint8_t has_state, r.value<uint8_t>());
  if (has_state) {
    SeqState s;
    STRATA_TRY(read_checkpoint(r, s.now));
    STRATA_ASSIGN(const uint32_t n, r.value<uint32_t>());
    for (uint32_t i = 0; i < n; ++i) {
      StateCheckpoint c;
      STRATA_TRY(read_checkpoint(r, c));  // each holds its data: n is bounded by the bytes
      s.checkpoints.push_back(std::move(c));
    }
    blob.state = std::move(s);
  }
  if (r.left() != 0) return make_error("saved sequence: bytes left after its end");
  return blob;
}

}  // namespace strata::memory
