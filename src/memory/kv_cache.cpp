#include "memory/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "base/checked.h"

namespace strata::memory {
namespace {

size_t layers_with_cache(const KvConfig& c) {
  return static_cast<size_t>(std::count(c.layer_has_kv.begin(), c.layer_has_kv.end(), 1));
}

}  // namespace

uint64_t KvCache::bytes_needed(const KvConfig& c) {
  if (c.n_seq < 0 || c.n_ctx_per_seq < 0 || c.n_embd_k < 0 || c.n_embd_v < 0) return kSaturated;
  return sat_mul(layers_with_cache(c), uint64_t(c.n_seq), uint64_t(c.n_ctx_per_seq),
                 sat_add(uint64_t(c.n_embd_k), uint64_t(c.n_embd_v)), sizeof(uint16_t));
}

Result<KvCache> KvCache::create(const KvConfig& config) {
  if (config.n_seq < 1 || config.n_ctx_per_seq < 1 || config.n_embd_k < 0 || config.n_embd_v < 0 ||
      static_cast<int32_t>(config.layer_has_kv.size()) != config.n_layer) {
    return make_error("KV cache: bad configuration (n_seq {}, n_ctx_per_seq {}, {} layer flags for {} layers)",
                      config.n_seq, config.n_ctx_per_seq, config.layer_has_kv.size(), config.n_layer);
  }
  const uint64_t bytes = bytes_needed(config);
  if (bytes == kSaturated || bytes > std::numeric_limits<size_t>::max() / 2) {
    return make_error("KV cache: {} layers x {} sequences x {} cells is too large", layers_with_cache(config),
                      config.n_seq, config.n_ctx_per_seq);
  }
  KvCache c;
  c.config_ = config;
  c.slot_.assign(config.n_layer, -1);
  int32_t n = 0;
  for (int il = 0; il < config.n_layer; ++il) {
    if (config.layer_has_kv[il]) c.slot_[il] = n++;
  }
  const size_t cells = static_cast<size_t>(n) * config.n_seq * config.n_ctx_per_seq;
  try {
    c.k_.assign(cells * config.n_embd_k, 0);
    c.v_.assign(cells * config.n_embd_v, 0);
  } catch (const std::bad_alloc&) {
    return make_error("KV cache: cannot allocate {} bytes", bytes_needed(config));
  }
  c.n_past_.assign(config.n_seq, 0);
  return c;
}

Status KvCache::remove_from(int seq, int32_t p0) {
  if (seq < 0 || seq >= config_.n_seq) return make_error("KV cache: sequence {} out of range", seq);
  if (p0 < 0) return make_error("KV cache: position {} is negative", p0);
  n_past_[seq] = std::min(n_past_[seq], p0);
  return {};
}

Status KvCache::copy(int src, int dst) {
  if (src < 0 || src >= config_.n_seq || dst < 0 || dst >= config_.n_seq) {
    return make_error("KV cache: sequence copy {} -> {} out of range", src, dst);
  }
  if (src == dst) return {};
  const int32_t n = n_past_[src];
  for (int il = 0; il < config_.n_layer; ++il) {
    if (slot_[il] < 0 || n == 0) continue;
    std::memcpy(k(il, dst, 0), k(il, src, 0), sizeof(uint16_t) * n * config_.n_embd_k);
    std::memcpy(v(il, dst, 0), v(il, src, 0), sizeof(uint16_t) * n * config_.n_embd_v);
  }
  n_past_[dst] = n;
  return {};
}

}  // namespace strata::memory
