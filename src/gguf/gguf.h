// Validated, memory-mapped GGUF reader (v2, v3). Every count, length and offset is checked before use;
// errors name the file, the field and the byte offset.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "base/result.h"

namespace strata::gguf {

// GGUF metadata value type ids.
enum class ValueType : int32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata entry. Scalars are decoded; arrays keep a view of their packed bytes in the mapping
// (strings inside arrays are decoded once at open into string views).
struct KeyValue {
  std::string key;
  ValueType type = ValueType::U8;
  ValueType array_type = ValueType::U8;  // element type when type == ARRAY
  uint64_t array_size = 0;               // element count when type == ARRAY
  // Scalar payloads (only the one matching `type` is meaningful).
  uint64_t u = 0;     // U8/U16/U32/U64/BOOL
  int64_t i = 0;      // I8/I16/I32/I64
  double f = 0;       // F32/F64
  std::string_view str;                    // STRING
  const uint8_t* array_data = nullptr;     // packed numeric array elements
  std::vector<std::string_view> strings;   // STRING arrays
  uint64_t file_offset = 0;                // where the record starts, for messages
};

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
  DType type = DType::F32;
  uint64_t offset = 0;            // relative to the data section
  uint64_t nbytes = 0;
  uint64_t file_offset = 0;       // where the info record starts, for messages
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Maps and validates a file. The mapping stays valid while the File lives.
  static Result<std::shared_ptr<const File>> open(const std::string& path);
  // Validates an in-memory image (tests, received files); `name` is used in messages. Bytes are copied.
  static Result<std::shared_ptr<const File>> from_bytes(std::span<const uint8_t> bytes, std::string name);

  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  std::span<const uint8_t> bytes() const { return {base_, size_}; }

  const std::vector<KeyValue>& kvs() const { return kvs_; }
  const KeyValue* find(std::string_view key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const uint8_t* tensor_data(const TensorInfo& t) const { return base_ + data_offset_ + t.offset; }

  // Strict typed lookups (as llama.cpp's loader: no coercion between GGUF types, except that
  // get_int accepts any integer type whose value fits). Missing key: error; use has() first, or the
  // *_or variants, which fail only when the key exists with the wrong type.
  bool has(std::string_view key) const { return find(key) != nullptr; }
  Result<std::string_view> get_string(std::string_view key) const;
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;    // any integer type
  Result<float> get_f32(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string_view> get_string_or(std::string_view key, std::string_view fallback) const;
  Result<int64_t> get_int_or(std::string_view key, int64_t fallback) const;
  Result<float> get_f32_or(std::string_view key, float fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;
  // Arrays: integer arrays of any integer element type, f32 arrays, string arrays.
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;
  Result<std::span<const std::string_view>> get_string_array(std::string_view key) const;

 private:
  File() = default;
  Status parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;          // mmap'd region (munmap in the destructor), or null
  std::vector<uint8_t> owned_;       // from_bytes copy
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kvs_;
  std::vector<TensorInfo> tensors_;
  // Name -> index; the views point into kvs_/tensors_, which never change after parse().
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Writes GGUF v3 files. Tensors are written in the order they were added, aligned per general.alignment
// (32 unless set). Data is streamed: add_tensor takes a callback that writes the bytes when write() runs,
// so a file larger than RAM never needs to be held in memory.
class Writer {
 public:
  Writer();  // defined in writer.cpp, where Impl is complete
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_i32_array(std::string key, std::vector<int32_t> v);
  void set_f32_array(std::string key, std::vector<float> v);
  void set_string_array(std::string key, std::vector<std::string> v);
  // Copies a metadata entry from another file (e.g. tokenizer keys), any type.
  void copy_kv(const KeyValue& kv);

  using Fill = std::function<Status(uint8_t* dst, uint64_t nbytes)>;
  // ne: dims, ne[0] contiguous. Fill writes exactly the tensor's nbytes.
  Status add_tensor(std::string name, DType type, std::vector<int64_t> ne, Fill fill);
  Status add_tensor_bytes(std::string name, DType type, std::vector<int64_t> ne, std::vector<uint8_t> bytes);

  Status write(const std::string& path) const;
  Result<std::vector<uint8_t>> write_to_memory() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace strata::gguf
