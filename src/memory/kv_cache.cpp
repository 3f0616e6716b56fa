#include "memory/kv_cache.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <new>

#include "base/checked.h"
#include "tensor/quants.h"
#include "tensor/quantize_weights.h"

namespace strata::memory {
namespace {

constexpr DType kKvTypes[] = {DType::F16, DType::Q8_0, DType::Q4_0};

size_t layers_with_cache(const KvConfig& c) {
  return static_cast<size_t>(std::count(c.layer_has_kv.begin(), c.layer_has_kv.end(), 1));
}

int first_layer_with_cache(const KvConfig& c) {
  for (int il = 0; il < static_cast<int>(c.layer_has_kv.size()); ++il) {
    if (c.layer_has_kv[il]) return il;
  }
  return -1;
}

// A quantized row must be whole blocks, and so must each head's slice of it.
Status check_width(const char* which, DType type, int32_t row, int32_t head_dim, int layer) {
  const int64_t block = info(type).block_elems;
  if (block == 1) return {};
  const bool by_head = head_dim > 0 && head_dim % block != 0;
  if (by_head || row % block != 0) {
    return make_error("KV cache: {} type {} stores blocks of {} elements, but layer {} has {} {} (not a multiple of {})",
                      which, kv_type_name(type), block, layer, by_head ? "head_dim" : "a row of", by_head ? head_dim : row,
                      block);
  }
  return {};
}

void store_row(DType type, const float* x, uint8_t* dst, int64_t n) {
  switch (type) {
    case DType::F16: {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(x[i]);
      return;
    }
    case DType::Q8_0: return tensor::quantize_activations(DType::Q8_0, x, dst, n);  // x86 quantize_row_q8_0
    case DType::Q4_0: return tensor::quantize_row(DType::Q4_0, x, dst, n);          // quantize_row_q4_0_ref
    default: return;  // create() refused every other type
  }
}

}  // namespace

bool kv_type_supported(DType type) { return std::find(std::begin(kKvTypes), std::end(kKvTypes), type) != std::end(kKvTypes); }

std::string kv_type_name(DType type) {
  const auto i = dtype_info(static_cast<int32_t>(type));
  if (!i) return "type " + std::to_string(static_cast<int32_t>(type));
  std::string s(i->name);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<DType> parse_kv_type(std::string_view name) {
  for (DType t : kKvTypes) {
    if (kv_type_name(t) == name) return t;
  }
  std::string list;
  for (DType t : kKvTypes) list += (list.empty() ? "" : ", ") + kv_type_name(t);
  return make_error("KV cache type '{}' is not supported; the supported types are {}",
                    name.substr(0, std::min<size_t>(name.size(), 32)), list);
}

uint64_t kv_row_bytes(DType type, int64_t n) {
  if (n < 0) return kSaturated;
  const DTypeInfo& i = info(type);
  const uint64_t blocks = (static_cast<uint64_t>(n) + uint64_t(i.block_elems) - 1) / uint64_t(i.block_elems);
  return sat_mul(blocks, uint64_t(i.block_bytes));
}

uint64_t KvCache::bytes_needed(const KvConfig& c) {
  if (c.n_seq < 0 || c.n_ctx_per_seq < 0 || c.n_embd_k < 0 || c.n_embd_v < 0) return kSaturated;
  if (!kv_type_supported(c.type_k) || !kv_type_supported(c.type_v)) return kSaturated;
  return sat_mul(layers_with_cache(c), uint64_t(c.n_seq), uint64_t(c.n_ctx_per_seq),
                 sat_add(kv_row_bytes(c.type_k, c.n_embd_k), kv_row_bytes(c.type_v, c.n_embd_v)));
}

Result<KvCache> KvCache::create(const KvConfig& config) {
  if (config.n_seq < 1 || config.n_ctx_per_seq < 1 || config.n_embd_k < 0 || config.n_embd_v < 0 ||
      static_cast<int32_t>(config.layer_has_kv.size()) != config.n_layer) {
    return make_error("KV cache: bad configuration (n_seq {}, n_ctx_per_seq {}, {} layer flags for {} layers)",
                      config.n_seq, config.n_ctx_per_seq, config.layer_has_kv.size(), config.n_layer);
  }
  for (const DType t : {config.type_k, config.type_v}) {
    if (!kv_type_supported(t)) {
      STRATA_TRY(parse_kv_type(kv_type_name(t)));  // the error that lists the supported types
    }
  }
  if (const int layer = first_layer_with_cache(config); layer >= 0) {
    STRATA_TRY(check_width("K", config.type_k, config.n_embd_k, config.head_dim_k, layer));
    STRATA_TRY(check_width("V", config.type_v, config.n_embd_v, config.head_dim_v, layer));
  }
  const uint64_t bytes = bytes_needed(config);
  if (bytes == kSaturated || bytes > std::numeric_limits<size_t>::max() / 2) {
    return make_error("KV cache: {} layers x {} sequences x {} cells is too large", layers_with_cache(config),
                      config.n_seq, config.n_ctx_per_seq);
  }
  KvCache c;
  c.config_ = config;
  c.k_row_bytes_ = kv_row_bytes(config.type_k, config.n_embd_k);
  c.v_row_bytes_ = kv_row_bytes(config.type_v, config.n_embd_v);
  c.slot_.assign(config.n_layer, -1);
  int32_t n = 0;
  for (int il = 0; il < config.n_layer; ++il) {
    if (config.layer_has_kv[il]) c.slot_[il] = n++;
  }
  const size_t cells = static_cast<size_t>(n) * config.n_seq * config.n_ctx_per_seq;
  try {
    c.k_.assign(cells * c.k_row_bytes_, 0);
    c.v_.assign(cells * c.v_row_bytes_, 0);
  } catch (const std::bad_alloc&) {
    return make_error("KV cache: cannot allocate {} bytes", bytes);
  }
  c.n_past_.assign(config.n_seq, 0);
  return c;
}

void KvCache::write_k(int il, int seq, int pos, const float* x) {
  store_row(config_.type_k, x, k(il, seq, pos), config_.n_embd_k);
}

void KvCache::write_v(int il, int seq, int pos, const float* x) {
  store_row(config_.type_v, x, v(il, seq, pos), config_.n_embd_v);
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
    std::memcpy(k(il, dst, 0), k(il, src, 0), k_row_bytes_ * n);
    std::memcpy(v(il, dst, 0), v(il, src, 0), v_row_bytes_ * n);
  }
  n_past_[dst] = n;
  return {};
}

}  // namespace strata::memory
