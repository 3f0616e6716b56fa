// GGUF reader: maps the file and validates the whole header before anything else looks at it.
// Every read is bounded by the bytes that remain, so a hostile file can make open() fail but never
// make it read outside the image.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <unordered_map>

#include <fmt/ranges.h>

#include "gguf/gguf.h"
#include "gguf/layout.h"

namespace strata::gguf {
namespace {

// Which record a message is about. Cheap to build; only formatted when something fails.
struct Where {
  enum Kind { Header, Kv, Tensor } kind = Header;
  uint64_t index = 0;          // record number
  uint64_t record_at = 0;      // byte where the record starts
  std::string_view name;       // key / tensor name once read
};

std::string describe(const Where& w) {
  switch (w.kind) {
    case Where::Header: return "header";
    case Where::Kv:
      if (w.name.empty()) return fmt::format("kv #{} (record at byte {})", w.index, w.record_at);
      return fmt::format("key '{}' (record at byte {})", w.name, w.record_at);
    case Where::Tensor:
      if (w.name.empty()) return fmt::format("tensor info #{} (at byte {})", w.index, w.record_at);
      return fmt::format("tensor '{}' (info at byte {})", w.name, w.record_at);
  }
  return "?";
}

struct Parsed {
  uint32_t version = 0;
  uint64_t alignment = layout::kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<KeyValue> kvs;
  std::vector<TensorInfo> tensors;
};

class Parser {
 public:
  Parser(const std::string& path, const uint8_t* data, uint64_t size) : path_(path), data_(data), size_(size) {}

  Result<Parsed> run() {
    Parsed out;
    STRATA_TRY(parse_header(out));
    // Counts are validated against the remaining bytes in parse_header, so these reservations are bounded.
    out.kvs.reserve(n_kv_);
    for (uint64_t i = 0; i < n_kv_; ++i) {
      out.kvs.emplace_back();
      STRATA_TRY(parse_kv(i, out.kvs.back()));
    }
    STRATA_TRY(parse_alignment(out));
    out.tensors.reserve(n_tensors_);
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      out.tensors.emplace_back();
      STRATA_TRY(parse_tensor_info(i, out.tensors.back()));
    }
    STRATA_TRY(place_data(out));
    return out;
  }

 private:
  uint64_t remaining() const { return size_ - pos_; }

  Error fail(const Where& w, std::string problem) const {
    return make_error("{}: {}: {}", path_, describe(w), problem);
  }
  Error truncated(const Where& w, std::string_view field, std::string_view suffix, uint64_t need) const {
    return fail(w, fmt::format("{}{} at byte {}: truncated (needs {} bytes, {} remain of {})", field, suffix, pos_,
                               need, remaining(), size_));
  }

  // `field` + `suffix` name what is read (split so the hot path never builds a string).
  template <typename T>
  Result<T> read(const Where& w, std::string_view field, std::string_view suffix = {}) {
    if (sizeof(T) > remaining()) return truncated(w, field, suffix, sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof v);  // memcpy: fields are not aligned in the file
    pos_ += sizeof v;
    return v;
  }

  Result<std::string_view> read_string(const Where& w, std::string_view field) {
    const uint64_t at = pos_;
    STRATA_ASSIGN(const uint64_t len, read<uint64_t>(w, field, " length"));
    if (len > layout::kMaxStringLength) {
      return fail(w, fmt::format("{} length {} at byte {} exceeds the 1 GiB string limit", field, len, at));
    }
    if (len > remaining()) {
      return fail(w, fmt::format("{} length {} at byte {} runs past the end of the file: truncated ({} bytes remain)",
                                 field, len, at, remaining()));
    }
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

  Status parse_header(Parsed& out) {
    const Where w;
    STRATA_ASSIGN(const uint32_t magic, read<uint32_t>(w, "magic"));
    if (magic != layout::kMagic) {
      return fail(w, fmt::format("bad magic at byte 0: expected 'GGUF' (0x{:08x}), found 0x{:08x}", layout::kMagic,
                                 magic));
    }
    STRATA_ASSIGN(out.version, read<uint32_t>(w, "version"));
    if (out.version == 1) return make_error("{}: GGUF version 1 is not supported (only v2 and v3)", path_);
    if (out.version == 0) return fail(w, "version at byte 4: version 0 is invalid (only v2 and v3 are supported)");
    if ((out.version & 0xffff) == 0) {
      return fail(w, fmt::format("version at byte 4: version 0x{:08x} looks byte-swapped (a big-endian file?); "
                                 "only little-endian v2 and v3 are supported",
                                 out.version));
    }
    if (out.version > 3) {
      return fail(w, fmt::format("version at byte 4: GGUF version {} is not supported (only v2 and v3)", out.version));
    }
    STRATA_ASSIGN(n_tensors_, read_count(w, "n_tensors", layout::kMinTensorInfoBytes));
    STRATA_ASSIGN(n_kv_, read_count(w, "n_kv", layout::kMinKvBytes));
    return ok_status();
  }

  // A signed 64-bit record count, bounded by how many of the smallest records the file could still hold.
  Result<uint64_t> read_count(const Where& w, std::string_view field, uint64_t min_record) {
    const uint64_t at = pos_;
    STRATA_ASSIGN(const int64_t n, read<int64_t>(w, field));
    if (n < 0) return fail(w, fmt::format("{} at byte {}: count {} is negative", field, at, n));
    const uint64_t count = static_cast<uint64_t>(n);
    if (count > remaining() / min_record) {
      return fail(w, fmt::format("{} at byte {}: count {} cannot fit in the {} bytes that remain (truncated or corrupt)",
                                 field, at, count, remaining()));
    }
    return count;
  }

  Status parse_kv(uint64_t index, KeyValue& kv) {
    Where w{Where::Kv, index, pos_, {}};
    kv.file_offset = pos_;
    STRATA_ASSIGN(const std::string_view key, read_string(w, "key"));
    if (key.empty()) return fail(w, "key is empty");
    w.name = key;
    if (auto [it, inserted] = keys_.emplace(key, w.record_at); !inserted) {
      return fail(w, fmt::format("duplicate key (first defined at byte {})", it->second));
    }
    kv.key = std::string(key);
    const uint64_t type_at = pos_;
    STRATA_ASSIGN(const int32_t type, read<int32_t>(w, "value type"));
    if (!layout::is_known(type)) return fail(w, fmt::format("unknown value type {} at byte {}", type, type_at));
    kv.type = static_cast<ValueType>(type);
    if (kv.type == ValueType::ARRAY) return parse_array(w, kv);
    return parse_scalar(w, kv.type, kv);
  }

  Status parse_scalar(const Where& w, ValueType type, KeyValue& kv) {
    switch (type) {
      case ValueType::U8: { STRATA_ASSIGN(kv.u, read<uint8_t>(w, "u8 value")); break; }
      case ValueType::I8: { STRATA_ASSIGN(kv.i, read<int8_t>(w, "i8 value")); break; }
      case ValueType::U16: { STRATA_ASSIGN(kv.u, read<uint16_t>(w, "u16 value")); break; }
      case ValueType::I16: { STRATA_ASSIGN(kv.i, read<int16_t>(w, "i16 value")); break; }
      case ValueType::U32: { STRATA_ASSIGN(kv.u, read<uint32_t>(w, "u32 value")); break; }
      case ValueType::I32: { STRATA_ASSIGN(kv.i, read<int32_t>(w, "i32 value")); break; }
      case ValueType::U64: { STRATA_ASSIGN(kv.u, read<uint64_t>(w, "u64 value")); break; }
      case ValueType::I64: { STRATA_ASSIGN(kv.i, read<int64_t>(w, "i64 value")); break; }
      case ValueType::F32: { STRATA_ASSIGN(kv.f, read<float>(w, "f32 value")); break; }
      case ValueType::F64: { STRATA_ASSIGN(kv.f, read<double>(w, "f64 value")); break; }
      case ValueType::BOOL: {
        STRATA_ASSIGN(const uint8_t b, read<uint8_t>(w, "bool value"));
        kv.u = b != 0;
        break;
      }
      case ValueType::STRING: { STRATA_ASSIGN(kv.str, read_string(w, "string value")); break; }
      case ValueType::ARRAY: return fail(w, "internal: array passed as scalar");
    }
    return ok_status();
  }

  Status parse_array(const Where& w, KeyValue& kv) {
    const uint64_t type_at = pos_;
    STRATA_ASSIGN(const int32_t elem, read<int32_t>(w, "array element type"));
    if (elem == static_cast<int32_t>(ValueType::ARRAY)) {
      return fail(w, fmt::format("array element type at byte {} is array: nested arrays are not supported", type_at));
    }
    if (!layout::is_known(elem)) {
      return fail(w, fmt::format("unknown array element type {} at byte {}", elem, type_at));
    }
    kv.array_type = static_cast<ValueType>(elem);
    const uint64_t count_at = pos_;
    STRATA_ASSIGN(kv.array_size, read<uint64_t>(w, "array count"));
    if (kv.array_size > layout::kMaxArrayElements) {
      return fail(w, fmt::format("array count {} at byte {} exceeds the limit of 2^30 elements", kv.array_size,
                                 count_at));
    }
    // Strings take at least their 8-byte length each; checking that first bounds the reservation below.
    const uint64_t elem_size = layout::fixed_size(kv.array_type).value_or(8);
    if (kv.array_size > remaining() / elem_size) {
      return fail(w, fmt::format("array count {} at byte {}: {} {} elements need at least {} bytes, {} remain: "
                                 "truncated",
                                 kv.array_size, count_at, kv.array_size, value_type_name(kv.array_type),
                                 kv.array_size * elem_size, remaining()));
    }
    if (kv.array_type != ValueType::STRING) {
      kv.array_data = data_ + pos_;
      pos_ += kv.array_size * elem_size;
      return ok_status();
    }
    kv.strings.reserve(kv.array_size);
    for (uint64_t k = 0; k < kv.array_size; ++k) {
      auto s = read_string(w, "array string");
      if (!s.ok()) return make_error("{} (element {} of {})", s.error().message, k, kv.array_size);
      kv.strings.push_back(*s);
    }
    return ok_status();
  }

  Status parse_alignment(Parsed& out) {
    for (const KeyValue& kv : out.kvs) {
      if (kv.key != names::kAlignment) continue;
      const Where w{Where::Kv, 0, kv.file_offset, kv.key};
      if (kv.type != ValueType::U32) {
        return fail(w, fmt::format("alignment must be of type u32, found {}", value_type_name(kv.type)));
      }
      if (!layout::is_power_of_two(kv.u)) {
        return fail(w, fmt::format("alignment {} is not a nonzero power of two", kv.u));
      }
      out.alignment = kv.u;
    }
    return ok_status();
  }

  Status parse_tensor_info(uint64_t index, TensorInfo& t) {
    Where w{Where::Tensor, index, pos_, {}};
    t.file_offset = pos_;
    STRATA_ASSIGN(const std::string_view name, read_string(w, "name"));
    if (name.empty()) return fail(w, "name is empty");
    if (name.size() > layout::kMaxNameLength) {
      return fail(w, fmt::format("name is {} bytes long (maximum {})", name.size(), layout::kMaxNameLength));
    }
    w.name = name;
    if (auto [it, inserted] = tensor_names_.emplace(name, w.record_at); !inserted) {
      return fail(w, fmt::format("duplicate tensor name (first defined at byte {})", it->second));
    }
    t.name = std::string(name);

    const uint64_t dims_at = pos_;
    STRATA_ASSIGN(t.n_dims, read<uint32_t>(w, "n_dims"));
    if (t.n_dims < 1 || t.n_dims > layout::kMaxDims) {
      return fail(w, fmt::format("n_dims {} at byte {} is out of range (1..{})", t.n_dims, dims_at, layout::kMaxDims));
    }
    static constexpr std::string_view kNeNames[] = {"ne[0]", "ne[1]", "ne[2]", "ne[3]"};
    for (uint32_t k = 0; k < t.n_dims; ++k) {
      const uint64_t ne_at = pos_;
      STRATA_ASSIGN(t.ne[k], read<int64_t>(w, kNeNames[k]));
      if (t.ne[k] < 0) return fail(w, fmt::format("ne[{}] = {} at byte {} is negative", k, t.ne[k], ne_at));
    }
    const auto n_elements = layout::element_count(t.ne, t.n_dims);
    if (!n_elements) {
      return fail(w, fmt::format("element count of shape [{}] overflows int64",
                                 fmt::join(std::span(t.ne, t.n_dims), ", ")));
    }

    const uint64_t type_at = pos_;
    STRATA_ASSIGN(const int32_t type_id, read<int32_t>(w, "type"));
    const auto info = dtype_info(type_id);
    if (!info) return fail(w, fmt::format("type id {} at byte {} is unknown or removed", type_id, type_at));
    t.type = static_cast<DType>(type_id);
    if (t.ne[0] % info->block_elems != 0) {
      return fail(w, fmt::format("ne[0] = {} is not a multiple of the {} block size {}", t.ne[0], info->name,
                                 info->block_elems));
    }
    const auto nbytes = layout::byte_size(*info, *n_elements);
    if (!nbytes) return fail(w, "byte size overflows");
    t.nbytes = *nbytes;
    offset_at_.push_back(pos_);
    STRATA_ASSIGN(t.offset, read<uint64_t>(w, "offset"));
    return ok_status();
  }

  // The data section follows the tensor infos at the next alignment boundary; tensors must be packed in
  // header order, each starting at the padded end of the previous one, and lie inside the file.
  Status place_data(Parsed& out) {
    const Where header;
    const auto data_offset = layout::pad(pos_, out.alignment);
    if (!data_offset) return fail(header, "data section offset overflows");
    // Files without tensors (vocab-only) need not carry the padding.
    out.data_offset = out.tensors.empty() ? pos_ : *data_offset;
    if (out.data_offset > size_) {
      return fail(header, fmt::format("data section would start at byte {} (tensor infos end at byte {}, alignment {}), "
                                      "past the end of the file (size {}): truncated",
                                      out.data_offset, pos_, out.alignment, size_));
    }
    const uint64_t data_size = size_ - out.data_offset;
    uint64_t expected = 0;
    for (size_t i = 0; i < out.tensors.size(); ++i) {
      const TensorInfo& t = out.tensors[i];
      const Where w{Where::Tensor, i, t.file_offset, t.name};
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        return fail(w, fmt::format("offset {} at byte {} with {} bytes of data runs past the end of the file "
                                   "(data section holds {} bytes from byte {}, file size {})",
                                   t.offset, offset_at_[i], t.nbytes, data_size, out.data_offset, size_));
      }
      if (t.offset != expected) {
        std::string why = t.offset < expected                 ? "overlaps previous tensor data"
                          : t.offset % out.alignment != 0 ? fmt::format("is not aligned to {}", out.alignment)
                                                              : std::string("leaves a gap after previous tensor data");
        return fail(w, fmt::format("offset {} at byte {} {} (expected {})", t.offset, offset_at_[i], why, expected));
      }
      const auto padded = layout::pad(t.nbytes, out.alignment);
      if (!padded || __builtin_add_overflow(expected, *padded, &expected)) {
        return fail(w, "total data size overflows");
      }
    }
    return ok_status();
  }

  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::unordered_map<std::string_view, uint64_t> keys_;          // key -> record byte, for duplicates
  std::unordered_map<std::string_view, uint64_t> tensor_names_;  // name -> record byte
  std::vector<uint64_t> offset_at_;                              // byte of each tensor's offset field
};

}  // namespace

Status File::parse() {
  try {
    Parser parser(path_, base_, size_);
    STRATA_ASSIGN(Parsed parsed, parser.run());
    version_ = parsed.version;
    alignment_ = parsed.alignment;
    data_offset_ = parsed.data_offset;
    kvs_ = std::move(parsed.kvs);
    tensors_ = std::move(parsed.tensors);
    kv_index_.reserve(kvs_.size());
    for (size_t i = 0; i < kvs_.size(); ++i) kv_index_.emplace(kvs_[i].key, i);
    tensor_index_.reserve(tensors_.size());
    for (size_t i = 0; i < tensors_.size(); ++i) tensor_index_.emplace(tensors_[i].name, i);
    return ok_status();
  } catch (const std::bad_alloc&) {
    return make_error("{}: out of memory while reading the header", path_);
  } catch (const std::exception& e) {
    return make_error("{}: unexpected error while reading the header: {}", path_, e.what());
  }
}

Result<std::shared_ptr<const File>> File::open(const std::string& path) {
  try {
    std::shared_ptr<File> file(new File());
    file->path_ = path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error("{}: cannot open: {}", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return make_error("{}: cannot stat: {}", path, std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return make_error("{}: not a regular file", path);
    }
    file->size_ = static_cast<uint64_t>(st.st_size);
    if (file->size_ == 0) {
      ::close(fd);
      return make_error("{}: header: magic at byte 0: truncated (the file is empty)", path);
    }
    void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_err = errno;
    ::close(fd);  // the mapping keeps its own reference to the file
    if (map == MAP_FAILED) return make_error("{}: cannot mmap {} bytes: {}", path, file->size_, std::strerror(map_err));
    file->mapping_ = map;
    file->base_ = static_cast<const uint8_t*>(map);
    STRATA_TRY(file->parse());
    return std::shared_ptr<const File>(std::move(file));
  } catch (const std::bad_alloc&) {
    return make_error("{}: out of memory while opening", path);
  }
}

Result<std::shared_ptr<const File>> File::from_bytes(std::span<const uint8_t> bytes, std::string name) {
  try {
    std::shared_ptr<File> file(new File());
    file->path_ = name;
    file->owned_.assign(bytes.begin(), bytes.end());
    file->base_ = file->owned_.data();
    file->size_ = file->owned_.size();
    STRATA_TRY(file->parse());
    return std::shared_ptr<const File>(std::move(file));
  } catch (const std::bad_alloc&) {
    return make_error("{}: out of memory while copying {} bytes", name, bytes.size());
  }
}

File::~File() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

}  // namespace strata::gguf
