#include "net/candidates.h"

#include <cstring>
#include <limits>
#include <span>

#include "sampling/sampler.h"

namespace strata::net {
namespace {

struct WirePair {
  int32_t id;
  float logit;
};
static_assert(sizeof(WirePair) == 8);

}  // namespace

std::string pack_candidates(const float* logits, int64_t rows, int32_t n_vocab, uint32_t k, int32_t first_id) {
  const size_t per_row = std::min<size_t>(k, static_cast<size_t>(n_vocab));
  std::string out(static_cast<size_t>(rows) * per_row * sizeof(WirePair), '\0');
  char* dst = out.data();
  for (int64_t r = 0; r < rows; ++r) {
    const std::span<const float> row(logits + r * n_vocab, static_cast<size_t>(n_vocab));
    for (const auto& c : sampling::top_candidates(row, per_row)) {
      const WirePair p{c.id + first_id, c.logit};
      std::memcpy(dst, &p, sizeof p);
      dst += sizeof p;
    }
  }
  return out;
}

Result<std::vector<float>> unpack_candidates(const std::string& bytes, int64_t rows, int32_t n_vocab, uint32_t k) {
  const size_t per_row = std::min<size_t>(k, static_cast<size_t>(n_vocab));
  if (bytes.size() != static_cast<size_t>(rows) * per_row * sizeof(WirePair)) {
    return make_error("candidates of {} bytes, expected {} rows of {}", bytes.size(), rows, per_row);
  }
  std::vector<float> out(static_cast<size_t>(rows) * n_vocab, -std::numeric_limits<float>::infinity());
  const char* src = bytes.data();
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < per_row; ++i, src += sizeof(WirePair)) {
      WirePair p;
      std::memcpy(&p, src, sizeof p);
      if (p.id < 0 || p.id >= n_vocab) return make_error("candidate token id {} outside the vocabulary", p.id);
      out[static_cast<size_t>(r) * n_vocab + p.id] = p.logit;
    }
  }
  return out;
}

}  // namespace strata::net
