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

// A row must be whole heads (attention reads the cache head by head), and with a quantized type
// each head must be whole blocks.
Status check_width(const char* which, DType type, int32_t row, int32_t head_dim, int layer) {
  if (row > 0 && (head_dim <= 0 || row % head_dim != 0)) {
    return make_error("KV cache: layer {} has a {} row of {} elements, which is not a whole number of heads of {}",
                      layer, which, row, head_dim);
  }
  const int64_t block = info(type).block_elems;
  if (block > 1 && head_dim > 0 && head_dim % block != 0) {
    return make_error("KV cache: {} type {} stores blocks of {} elements, but layer {} has head_dim {} (not a multiple of {})",
                      which, kv_type_name(type), block, layer, head_dim, block);
  }
  return {};
}

void store_row(DType type, const float* x, uint8_t* dst, int64_t n) {
  switch (type) {
    case DType::F16: return tensor::quantize_activations(DType::F16, x, dst, n);  // round to nearest even
    case DType::Q8_0: return tensor::quantize_activations(DType::Q8_0, x, dst, n);  // x86 quantize_row_q8_0
    case DType::Q4_0: return tensor::quantize_row(DType::Q4_0, x, dst, n);          // quantize_row_q4_0_ref
    default: return;  // create() refused every other type
  }
}

// One head of 0 bytes for an empty row (create() checked that head_dim divides any other).
int32_t heads_per_row(int32_t n, int32_t head_dim) { return n > 0 ? n / head_dim : 1; }

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
  c.n_head_k_ = heads_per_row(config.n_embd_k, config.head_dim_k);
  c.n_head_v_ = heads_per_row(config.n_embd_v, config.head_dim_v);
  c.k_head_bytes_ = kv_row_bytes(config.type_k, config.n_embd_k / c.n_head_k_);
  c.v_head_bytes_ = kv_row_bytes(config.type_v, config.n_embd_v / c.n_head_v_);
  c.slot_.assign(config.n_layer, -1);
  int32_t n = 0;
  for (int il = 0; il < config.n_layer; ++il) {
    if (config.layer_has_kv[il]) c.slot_[il] = n++;
  }
  const size_t cells = static_cast<size_t>(n) * config.n_seq * config.n_ctx_per_seq;
  try {
    c.k_.assign(cells * c.k_row_bytes(), 0);
    c.v_.assign(cells * c.v_row_bytes(), 0);
  } catch (const std::bad_alloc&) {
    return make_error("KV cache: cannot allocate {} bytes", bytes);
  }
  c.n_past_.assign(config.n_seq, 0);
  return c;
}

// Head by head: quantized heads are whole blocks, so the bytes equal those of the whole row.
void KvCache::store(bool is_k, int il, int seq, int pos, const float* x) {
  const DType type = is_k ? config_.type_k : config_.type_v;
  const int32_t heads = is_k ? n_head_k_ : n_head_v_;
  const int64_t n = (is_k ? config_.n_embd_k : config_.n_embd_v) / heads;
  for (int32_t h = 0; h < heads; ++h) store_row(type, x + h * n, is_k ? k(il, seq, h, pos) : v(il, seq, h, pos), n);
}

void KvCache::write_k(int il, int seq, int pos, const float* x) { store(true, il, seq, pos, x); }

void KvCache::write_v(int il, int seq, int pos, const float* x) { store(false, il, seq, pos, x); }

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
    for (int32_t h = 0; h < n_head_k_; ++h) std::memcpy(k(il, dst, h, 0), k(il, src, h, 0), k_head_bytes_ * n);
    for (int32_t h = 0; h < n_head_v_; ++h) std::memcpy(v(il, dst, h, 0), v(il, src, h, 0), v_head_bytes_ * n);
  }
  n_past_[dst] = n;
  return {};
}

Result<KvRows> KvCache::save_rows(int seq) const {
  if (seq < 0 || seq >= config_.n_seq) return make_error("KV cache: sequence {} out of range", seq);
  KvRows rows;
  rows.n = n_past_[seq];
  const size_t n = static_cast<size_t>(rows.n);
  const size_t layers = static_cast<size_t>(std::count_if(slot_.begin(), slot_.end(), [](int32_t s) { return s >= 0; }));
  try {
    rows.k.resize(layers * n * k_row_bytes());
    rows.v.resize(layers * n * v_row_bytes());
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kResourceExhausted, "KV cache: cannot copy {} positions of sequence {}", n, seq);
  }
  uint8_t* k_out = rows.k.data();
  uint8_t* v_out = rows.v.data();
  for (int il = 0; il < config_.n_layer && n > 0; ++il) {
    if (slot_[il] < 0) continue;
    for (int32_t h = 0; h < n_head_k_; ++h, k_out += k_head_bytes_ * n) std::memcpy(k_out, k(il, seq, h, 0), k_head_bytes_ * n);
    for (int32_t h = 0; h < n_head_v_; ++h, v_out += v_head_bytes_ * n) std::memcpy(v_out, v(il, seq, h, 0), v_head_bytes_ * n);
  }
  return rows;
}

Status KvCache::fits(const KvRows& rows) const {
  if (rows.n < 0 || rows.n > config_.n_ctx_per_seq) {
    return make_error("KV cache: {} positions do not fit a sequence of {} cells", rows.n, config_.n_ctx_per_seq);
  }
  const size_t n = static_cast<size_t>(rows.n);
  const size_t layers = static_cast<size_t>(std::count_if(slot_.begin(), slot_.end(), [](int32_t s) { return s >= 0; }));
  if (rows.k.size() != layers * n * k_row_bytes() || rows.v.size() != layers * n * v_row_bytes()) {
    return make_error("KV cache: saved rows of {} positions have {} + {} bytes, not this cache's {} + {}", n,
                      rows.k.size(), rows.v.size(), layers * n * k_row_bytes(), layers * n * v_row_bytes());
  }
  return {};
}

Status KvCache::load_rows(int seq, const KvRows& rows) {
  if (seq < 0 || seq >= config_.n_seq) return make_error("KV cache: sequence {} out of range", seq);
  STRATA_TRY(fits(rows));
  const size_t n = static_cast<size_t>(rows.n);
  const uint8_t* k_in = rows.k.data();
  const uint8_t* v_in = rows.v.data();
  for (int il = 0; il < config_.n_layer && n > 0; ++il) {
    if (slot_[il] < 0) continue;
    for (int32_t h = 0; h < n_head_k_; ++h, k_in += k_head_bytes_ * n) std::memcpy(k(il, seq, h, 0), k_in, k_head_bytes_ * n);
    for (int32_t h = 0; h < n_head_v_; ++h, v_in += v_head_bytes_ * n) std::memcpy(v(il, seq, h, 0), v_in, v_head_bytes_ * n);
  }
  n_past_[seq] = rows.n;
  return {};
}

}  // namespace strata::memory
