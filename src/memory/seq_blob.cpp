#include "memory/seq_blob.h"

#include <cstring>
#include <string_view>

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

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  Status bytes(void* p, size_t n) {
    if (n > in_.size() - at_) return make_error("saved sequence: {} bytes needed at offset {}, {} left", n, at_, in_.size() - at_);
    std::memcpy(p, in_.data() + at_, n);
    at_ += n;
    return {};
  }
  template <typename T>
  Result<T> value() {
    T v{};
    STRATA_TRY(bytes(&v, sizeof v));
    return v;
  }
  // A length-prefixed array of `elem`-byte items, its length checked against what is left first.
  template <typename T>
  Status array(std::vector<T>& out) {
    STRATA_ASSIGN(const uint64_t n, value<uint64_t>());
    if (n > (in_.size() - at_) / sizeof(T)) return make_error("saved sequence: an array of {} items is longer than the data", n);
    out.resize(n);
    return bytes(out.data(), n * sizeof(T));
  }
  Status checkpoint(StateCheckpoint& c) {
    STRATA_ASSIGN(c.pos, value<int32_t>());
    STRATA_TRY(array(c.conv));
    return array(c.ssm);
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 0;
};

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
  Reader r(bytes);
  char magic[kMagic.size()];
  STRATA_TRY(r.bytes(magic, sizeof magic));
  if (std::string_view(magic, sizeof magic) != kMagic) return make_error("saved sequence: not a {} blob", kMagic);
  SeqBlob blob;
  STRATA_ASSIGN(blob.kv.n, r.value<int32_t>());
  STRATA_TRY(r.array(blob.kv.k));
  STRATA_TRY(r.array(blob.kv.v));
  STRATA_ASSIGN(const uint8_t has_state, r.value<uint8_t>());
  if (has_state) {
    SeqState s;
    STRATA_TRY(r.checkpoint(s.now));
    STRATA_ASSIGN(const uint32_t n, r.value<uint32_t>());
    for (uint32_t i = 0; i < n; ++i) {
      StateCheckpoint c;
      STRATA_TRY(r.checkpoint(c));  // each holds its data: n is bounded by the bytes
      s.checkpoints.push_back(std::move(c));
    }
    blob.state = std::move(s);
  }
  if (!r.done()) return make_error("saved sequence: bytes left after its end");
  return blob;
}

}  // namespace strata::memory
