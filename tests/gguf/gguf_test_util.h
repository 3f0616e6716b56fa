// Helpers for the GGUF tests: building small valid files, patching fields in place, and checking
// that an error message contains what it should.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace strata::gguf::testing {

using Bytes = std::vector<uint8_t>;

inline Result<std::shared_ptr<const File>> parse(const Bytes& bytes, std::string name = "test.gguf") {
  return File::from_bytes(bytes, std::move(name));
}

// Writes a little-endian value into `bytes` at `at` (the test fails if it does not fit).
template <typename T>
void patch(Bytes& bytes, uint64_t at, T value) {
  ASSERT_LE(at + sizeof(T), bytes.size()) << "patch outside the file";
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

template <typename T>
T peek(const Bytes& bytes, uint64_t at) {
  T v{};
  if (at + sizeof(T) <= bytes.size()) std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}

// Byte positions of a tensor info's fields (record layout: name, n_dims, ne[n_dims], type, offset).
struct TensorFields {
  uint64_t name_len, n_dims, ne0, type, offset;
};
inline TensorFields tensor_fields(const TensorInfo& t) {
  const uint64_t n_dims = t.file_offset + 8 + t.name.size();
  const uint64_t type = n_dims + 4 + 8ull * t.n_dims;
  return {t.file_offset, n_dims, n_dims + 4, type, type + 4};
}

// Byte positions of a KV record's fields (key, type, then the value or array element type + count).
struct KvFields {
  uint64_t key_len, key, type, value;
};
inline KvFields kv_fields(const KeyValue& kv) {
  const uint64_t type = kv.file_offset + 8 + kv.key.size();
  return {kv.file_offset, kv.file_offset + 8, type, type + 4};
}

// A small valid file: a few scalar keys, a string array, an i32 array, and three tensors
// (F32, Q8_0, F16) so there is a middle tensor to misplace.
inline Bytes small_file(uint32_t alignment = 32) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("general.alignment", alignment);
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_string_array("tokenizer.ggml.tokens", {"<s>", "</s>", "hello", "world"});
  w.set_i32_array("tokenizer.ggml.token_type", {3, 3, 1, 1});
  auto fill_pattern = [](uint8_t seed) {
    return [seed](uint8_t* dst, uint64_t n) -> Status {
      for (uint64_t k = 0; k < n; ++k) dst[k] = static_cast<uint8_t>(seed + k);
      return ok_status();
    };
  };
  EXPECT_TRUE(w.add_tensor("token_embd.weight", DType::F32, {8, 4}, fill_pattern(1)).ok());
  EXPECT_TRUE(w.add_tensor("blk.0.attn_q.weight", DType::Q8_0, {32, 2}, fill_pattern(2)).ok());
  EXPECT_TRUE(w.add_tensor("output_norm.weight", DType::F16, {8}, fill_pattern(3)).ok());
  auto bytes = w.write_to_memory();
  EXPECT_TRUE(bytes.ok()) << bytes.error().message;
  return bytes.ok() ? *bytes : Bytes{};
}

}  // namespace strata::gguf::testing

// The result must be an error whose message contains `fragment`.
#define EXPECT_GGUF_ERROR(result, fragment)                                                \
  do {                                                                                     \
    const auto& strata_r_ = (result);                                                      \
    if (strata_r_.ok()) {                                                                  \
      ADD_FAILURE() << "expected an error containing \"" << (fragment) << "\", got success"; \
    } else {                                                                               \
      EXPECT_NE(strata_r_.error().message.find(fragment), std::string::npos)               \
          << "message: " << strata_r_.error().message << "\nexpected fragment: " << (fragment); \
    }                                                                                      \
  } while (0)
