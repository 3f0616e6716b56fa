// Typed metadata lookups. Strict like llama.cpp's loader: a key written as i32 is not a u32, so a
// converter that wrote the wrong type is caught here instead of being silently reinterpreted.
#include <cstring>
#include <limits>
#include <new>

#include "gguf/gguf.h"
#include "gguf/layout.h"

namespace strata::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

namespace {

std::string type_description(const KeyValue& kv) {
  if (kv.type != ValueType::ARRAY) return std::string(value_type_name(kv.type));
  return fmt::format("array of {}", value_type_name(kv.array_type));
}

Error wrong_type(const std::string& path, const KeyValue& kv, std::string_view expected) {
  return make_error("{}: key '{}' (record at byte {}): expected {}, found {}", path, kv.key, kv.file_offset, expected,
                    type_description(kv));
}

// Decodes one element of a packed integer (or bool) array as int64; nullopt if a u64 does not fit.
std::optional<int64_t> int_element(const KeyValue& kv, uint64_t index) {
  const uint8_t* p = kv.array_data + index * *layout::fixed_size(kv.array_type);
  auto load = [p]<typename T>(T) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (kv.array_type) {
    case ValueType::U8: return load(uint8_t{});
    case ValueType::I8: return load(int8_t{});
    case ValueType::U16: return load(uint16_t{});
    case ValueType::I16: return load(int16_t{});
    case ValueType::U32: return load(uint32_t{});
    case ValueType::I32: return load(int32_t{});
    case ValueType::I64: return load(int64_t{});
    case ValueType::BOOL: return load(uint8_t{}) != 0;
    case ValueType::U64: {
      const uint64_t v = load(uint64_t{});
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(v);
    }
    default: return std::nullopt;
  }
}

}  // namespace

const KeyValue* File::find(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

#define STRATA_GGUF_FIND(kv, key)                                            \
  const KeyValue* kv = find(key);                                            \
  if (kv == nullptr) return make_error("{}: key '{}' not found", path_, key)

Result<std::string_view> File::get_string(std::string_view key) const {
  STRATA_GGUF_FIND(kv, key);
  if (kv->type != ValueType::STRING) return wrong_type(path_, *kv, "string");
  return kv->str;
}

Result<uint32_t> File::get_u32(std::string_view key) const {
  STRATA_GGUF_FIND(kv, key);
  if (kv->type != ValueType::U32) return wrong_type(path_, *kv, "u32");
  return static_cast<uint32_t>(kv->u);
}

Result<int64_t> File::get_int(std::string_view key) const {
  STRATA_GGUF_FIND(kv, key);
  if (!layout::is_integer(kv->type)) return wrong_type(path_, *kv, "an integer");
  switch (kv->type) {
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64: return kv->i;
    default: break;
  }
  if (kv->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return make_error("{}: key '{}' (record at byte {}): u64 value {} does not fit in int64", path_, kv->key,
                      kv->file_offset, kv->u);
  }
  return static_cast<int64_t>(kv->u);
}

Result<float> File::get_f32(std::string_view key) const {
  STRATA_GGUF_FIND(kv, key);
  if (kv->type != ValueType::F32) return wrong_type(path_, *kv, "f32");
  return static_cast<float>(kv->f);
}

Result<bool> File::get_bool(std::string_view key) const {
  STRATA_GGUF_FIND(kv, key);
  if (kv->type != ValueType::BOOL) return wrong_type(path_, *kv, "bool");
  return kv->u != 0;
}

Result<std::string_view> File::get_string_or(std::string_view key, std::string_view fallback) const {
  return has(key) ? get_string(key) : Result<std::string_view>(fallback);
}

Result<int64_t> File::get_int_or(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : Result<int64_t>(fallback);
}

Result<float> File::get_f32_or(std::string_view key, float fallback) const {
  return has(key) ? get_f32(key) : Result<float>(fallback);
}

Result<bool> File::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : Result<bool>(fallback);
}

Result<std::vector<int64_t>> File::get_int_array(std::string_view key) const {
  STRATA_GGUF_FIND(kv, key);
  if (kv->type != ValueType::ARRAY ||
      !(layout::is_integer(kv->array_type) || kv->array_type == ValueType::BOOL)) {
    return wrong_type(path_, *kv, "array of integers");
  }
  try {
    std::vector<int64_t> out;
    out.reserve(kv->array_size);
    for (uint64_t k = 0; k < kv->array_size; ++k) {
      const auto v = int_element(*kv, k);
      if (!v) {
        return make_error("{}: key '{}' (record at byte {}): element {} does not fit in int64", path_, kv->key,
                          kv->file_offset, k);
      }
      out.push_back(*v);
    }
    return out;
  } catch (const std::bad_alloc&) {
    return make_error("{}: key '{}': out of memory for {} elements", path_, kv->key, kv->array_size);
  }
}

Result<std::vector<float>> File::get_f32_array(std::string_view key) const {
  STRATA_GGUF_FIND(kv, key);
  if (kv->type != ValueType::ARRAY || kv->array_type != ValueType::F32) {
    return wrong_type(path_, *kv, "array of f32");
  }
  try {
    std::vector<float> out(kv->array_size);
    if (!out.empty()) std::memcpy(out.data(), kv->array_data, out.size() * sizeof(float));
    return out;
  } catch (const std::bad_alloc&) {
    return make_error("{}: key '{}': out of memory for {} elements", path_, kv->key, kv->array_size);
  }
}

Result<std::span<const std::string_view>> File::get_string_array(std::string_view key) const {
  STRATA_GGUF_FIND(kv, key);
  if (kv->type != ValueType::ARRAY || kv->array_type != ValueType::STRING) {
    return wrong_type(path_, *kv, "array of string");
  }
  return std::span<const std::string_view>(kv->strings);
}

#undef STRATA_GGUF_FIND

}  // namespace strata::gguf
