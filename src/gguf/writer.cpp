// GGUF v3 writer. The header is built in memory (it is small); tensor data is produced one tensor at a
// time by the caller's Fill callback. Files are written to a temporary name and renamed at the end, so a
// failure never leaves a partial file under the requested name.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "gguf/gguf.h"
#include "gguf/layout.h"

namespace strata::gguf {

namespace {

// Destination of the serialized bytes: a memory buffer or a file descriptor.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual Status write(const uint8_t* p, size_t n) = 0;
  // A zeroed region of n bytes to fill in place, then commit().
  virtual Result<uint8_t*> begin(uint64_t n) = 0;
  virtual Status commit() = 0;
};

class MemorySink final : public Sink {
 public:
  Status write(const uint8_t* p, size_t n) override {
    out.insert(out.end(), p, p + n);
    return ok_status();
  }
  Result<uint8_t*> begin(uint64_t n) override {
    const size_t start = out.size();
    out.resize(start + n);
    return out.data() + start;
  }
  Status commit() override { return ok_status(); }
  std::vector<uint8_t> out;
};

class FileSink final : public Sink {
 public:
  FileSink(int fd, const std::string& path) : fd_(fd), path_(path) {}
  Status write(const uint8_t* p, size_t n) override {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return make_error("{}: write failed: {}", path_, std::strerror(errno));
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return ok_status();
  }
  Result<uint8_t*> begin(uint64_t n) override {
    buffer_.assign(n, 0);
    return buffer_.data();
  }
  Status commit() override { return write(buffer_.data(), buffer_.size()); }

 private:
  int fd_;
  const std::string& path_;
  std::vector<uint8_t> buffer_;  // one tensor at a time
};

class HeaderBuilder {
 public:
  template <typename T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof v);
    bytes.insert(bytes.end(), b, b + sizeof b);
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> bytes;
};

Status check_string(std::string_view what, std::string_view s) {
  if (s.size() > layout::kMaxStringLength) {
    return make_error("gguf writer: {} is {} bytes, over the 1 GiB string limit", what, s.size());
  }
  return ok_status();
}

const uint8_t kZeros[256] = {};

Status put_padding(Sink& sink, uint64_t written, uint64_t alignment) {
  uint64_t n = *layout::pad(written, alignment) - written;
  while (n > 0) {
    const size_t chunk = n < sizeof kZeros ? static_cast<size_t>(n) : sizeof kZeros;
    STRATA_TRY(sink.write(kZeros, chunk));
    n -= chunk;
  }
  return ok_status();
}

}  // namespace

struct Writer::Impl {
  // A metadata entry with owned storage (KeyValue only holds views into a mapping).
  struct Kv {
    std::string key;
    ValueType type = ValueType::U8;
    ValueType array_type = ValueType::U8;
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    std::string str;
    std::vector<uint8_t> packed;       // numeric array elements, already little-endian packed
    uint64_t packed_count = 0;
    std::vector<std::string> strings;  // string array elements
  };
  struct Tensor {
    std::string name;
    DType type = DType::F32;
    std::vector<int64_t> ne;
    uint64_t nbytes = 0;
    Fill fill;
  };

  std::vector<Kv> kvs;
  std::unordered_map<std::string, size_t> kv_index;
  std::vector<Tensor> tensors;
  std::unordered_set<std::string> tensor_names;
  std::optional<Error> deferred;  // first error from a setter (they return void); reported by write()

  void put(Kv kv) {
    try {
      if (kv.key.empty()) {
        if (!deferred) deferred = make_error("gguf writer: metadata key is empty");
        return;
      }
      // Setting a key twice replaces the value but keeps its original position.
      if (auto it = kv_index.find(kv.key); it != kv_index.end()) {
        kvs[it->second] = std::move(kv);
        return;
      }
      kv_index.emplace(kv.key, kvs.size());
      kvs.push_back(std::move(kv));
    } catch (const std::bad_alloc&) {
      if (!deferred) deferred = make_error("gguf writer: out of memory while setting metadata");
    }
  }

  static Kv make(std::string key, ValueType type);
  Result<uint64_t> alignment() const;  // general.alignment, validated, or the default
  Status emit(Sink& sink) const;
  Status emit_guarded(Sink& sink) const;  // emit() with exceptions turned into errors
  Status write_file(const std::string& path) const;
  static void put_scalar(HeaderBuilder& h, const Kv& kv);
  static Status put_kv(HeaderBuilder& h, const Kv& kv);

  template <typename T>
  static std::vector<uint8_t> pack(const std::vector<T>& v) {
    std::vector<uint8_t> out(v.size() * sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
};

void Writer::Impl::put_scalar(HeaderBuilder& h, const Kv& kv) {
  switch (kv.type) {
    case ValueType::U8: h.put<uint8_t>(static_cast<uint8_t>(kv.u)); break;
    case ValueType::I8: h.put<int8_t>(static_cast<int8_t>(kv.i)); break;
    case ValueType::U16: h.put<uint16_t>(static_cast<uint16_t>(kv.u)); break;
    case ValueType::I16: h.put<int16_t>(static_cast<int16_t>(kv.i)); break;
    case ValueType::U32: h.put<uint32_t>(static_cast<uint32_t>(kv.u)); break;
    case ValueType::I32: h.put<int32_t>(static_cast<int32_t>(kv.i)); break;
    case ValueType::U64: h.put<uint64_t>(kv.u); break;
    case ValueType::I64: h.put<int64_t>(kv.i); break;
    case ValueType::F32: h.put<float>(static_cast<float>(kv.f)); break;
    case ValueType::F64: h.put<double>(kv.f); break;
    case ValueType::BOOL: h.put<uint8_t>(kv.u != 0 ? 1 : 0); break;
    case ValueType::STRING: h.put_string(kv.str); break;
    case ValueType::ARRAY: break;  // handled by the caller
  }
}

Status Writer::Impl::put_kv(HeaderBuilder& h, const Kv& kv) {
  STRATA_TRY(check_string("key", kv.key));
  if (!layout::is_known(static_cast<int32_t>(kv.type))) {
    return make_error("gguf writer: key '{}': unknown value type {}", kv.key, static_cast<int32_t>(kv.type));
  }
  h.put_string(kv.key);
  h.put<int32_t>(static_cast<int32_t>(kv.type));
  if (kv.type == ValueType::STRING) STRATA_TRY(check_string(fmt::format("value of key '{}'", kv.key), kv.str));
  if (kv.type != ValueType::ARRAY) {
    put_scalar(h, kv);
    return ok_status();
  }
  if (kv.array_type == ValueType::ARRAY || !layout::is_known(static_cast<int32_t>(kv.array_type))) {
    return make_error("gguf writer: key '{}': unsupported array element type {}", kv.key,
                      static_cast<int32_t>(kv.array_type));
  }
  const uint64_t count = kv.array_type == ValueType::STRING ? kv.strings.size() : kv.packed_count;
  if (count > layout::kMaxArrayElements) {
    return make_error("gguf writer: key '{}': array of {} elements exceeds the 2^30 limit", kv.key, count);
  }
  h.put<int32_t>(static_cast<int32_t>(kv.array_type));
  h.put<uint64_t>(count);
  if (kv.array_type == ValueType::STRING) {
    for (const std::string& s : kv.strings) {
      STRATA_TRY(check_string(fmt::format("element of key '{}'", kv.key), s));
      h.put_string(s);
    }
  } else {
    h.bytes.insert(h.bytes.end(), kv.packed.begin(), kv.packed.end());
  }
  return ok_status();
}

Result<uint64_t> Writer::Impl::alignment() const {
  const auto it = kv_index.find(std::string(names::kAlignment));
  if (it == kv_index.end()) return layout::kDefaultAlignment;
  const Kv& kv = kvs[it->second];
  if (kv.type != ValueType::U32) {
    return make_error("gguf writer: {} must be u32, found {}", names::kAlignment, value_type_name(kv.type));
  }
  if (!layout::is_power_of_two(kv.u)) {
    return make_error("gguf writer: {} = {} is not a nonzero power of two", names::kAlignment, kv.u);
  }
  return kv.u;
}

Status Writer::Impl::emit(Sink& sink) const {
  if (deferred) return *deferred;
  STRATA_ASSIGN(const uint64_t alignment, alignment());
  HeaderBuilder h;
  h.put<uint32_t>(layout::kMagic);
  h.put<uint32_t>(layout::kWriteVersion);
  h.put<int64_t>(static_cast<int64_t>(tensors.size()));
  h.put<int64_t>(static_cast<int64_t>(kvs.size()));
  for (const auto& kv : kvs) STRATA_TRY(put_kv(h, kv));
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    h.put_string(t.name);
    h.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) h.put<int64_t>(n);
    h.put<int32_t>(static_cast<int32_t>(t.type));
    h.put<uint64_t>(offset);
    const auto padded = layout::pad(t.nbytes, alignment);
    if (!padded || __builtin_add_overflow(offset, *padded, &offset)) {
      return make_error("gguf writer: total tensor data size overflows at tensor '{}'", t.name);
    }
  }
  STRATA_TRY(sink.write(h.bytes.data(), h.bytes.size()));
  if (tensors.empty()) return ok_status();  // vocab-only files: no data section, no padding
  STRATA_TRY(put_padding(sink, h.bytes.size(), alignment));
  for (const auto& t : tensors) {
    STRATA_ASSIGN(uint8_t* dst, sink.begin(t.nbytes));
    Status filled = ok_status();
    try {
      filled = t.fill(dst, t.nbytes);
    } catch (const std::exception& e) {
      filled = make_error("fill threw: {}", e.what());
    } catch (...) {
      filled = make_error("fill threw an unknown exception");
    }
    if (!filled.ok()) return make_error("gguf writer: tensor '{}': {}", t.name, filled.error().message);
    STRATA_TRY(sink.commit());
    STRATA_TRY(put_padding(sink, t.nbytes, alignment));
  }
  return ok_status();
}

Status Writer::Impl::write_file(const std::string& path) const {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return make_error("{}: cannot create temporary file {}: {}", path, tmp, std::strerror(errno));
  auto abandon = [&](Error e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };
  ::fchmod(fd, 0644);  // mkstemp creates 0600; a model file is normally world-readable
  FileSink sink(fd, tmp);
  if (Status s = emit_guarded(sink); !s.ok()) return abandon(std::move(s).error());
  if (::fsync(fd) != 0) return abandon(make_error("{}: fsync failed: {}", tmp, std::strerror(errno)));
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return make_error("{}: close failed: {}", tmp, std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return make_error("{}: cannot rename {} into place: {}", path, tmp, std::strerror(err));
  }
  return ok_status();
}

Status Writer::Impl::emit_guarded(Sink& sink) const {
  try {
    return emit(sink);
  } catch (const std::bad_alloc&) {
    return make_error("gguf writer: out of memory");
  } catch (const std::exception& e) {
    return make_error("gguf writer: {}", e.what());
  }
}

Writer::Writer() : impl_(std::make_shared<Impl>()) {}

Writer::Impl::Kv Writer::Impl::make(std::string key, ValueType type) {
  Kv kv;
  kv.key = std::move(key);
  kv.type = type;
  return kv;
}

void Writer::set_u32(std::string key, uint32_t v) {
  auto kv = Impl::make(std::move(key), ValueType::U32);
  kv.u = v;
  impl_->put(std::move(kv));
}
void Writer::set_i32(std::string key, int32_t v) {
  auto kv = Impl::make(std::move(key), ValueType::I32);
  kv.i = v;
  impl_->put(std::move(kv));
}
void Writer::set_u64(std::string key, uint64_t v) {
  auto kv = Impl::make(std::move(key), ValueType::U64);
  kv.u = v;
  impl_->put(std::move(kv));
}
void Writer::set_f32(std::string key, float v) {
  auto kv = Impl::make(std::move(key), ValueType::F32);
  kv.f = v;
  impl_->put(std::move(kv));
}
void Writer::set_bool(std::string key, bool v) {
  auto kv = Impl::make(std::move(key), ValueType::BOOL);
  kv.u = v ? 1 : 0;
  impl_->put(std::move(kv));
}
void Writer::set_string(std::string key, std::string v) {
  auto kv = Impl::make(std::move(key), ValueType::STRING);
  kv.str = std::move(v);
  impl_->put(std::move(kv));
}

void Writer::set_i32_array(std::string key, std::vector<int32_t> v) {
  try {
    auto kv = Impl::make(std::move(key), ValueType::ARRAY);
    kv.array_type = ValueType::I32;
    kv.packed = Impl::pack(v);
    kv.packed_count = v.size();
    impl_->put(std::move(kv));
  } catch (const std::bad_alloc&) {
    if (!impl_->deferred) impl_->deferred = make_error("gguf writer: out of memory while setting metadata");
  }
}
void Writer::set_f32_array(std::string key, std::vector<float> v) {
  try {
    auto kv = Impl::make(std::move(key), ValueType::ARRAY);
    kv.array_type = ValueType::F32;
    kv.packed = Impl::pack(v);
    kv.packed_count = v.size();
    impl_->put(std::move(kv));
  } catch (const std::bad_alloc&) {
    if (!impl_->deferred) impl_->deferred = make_error("gguf writer: out of memory while setting metadata");
  }
}
void Writer::set_string_array(std::string key, std::vector<std::string> v) {
  auto kv = Impl::make(std::move(key), ValueType::ARRAY);
  kv.array_type = ValueType::STRING;
  kv.strings = std::move(v);
  impl_->put(std::move(kv));
}

void Writer::copy_kv(const KeyValue& src) {
  try {
    auto kv = Impl::make(src.key, src.type);
    kv.array_type = src.array_type;
    kv.u = src.u;
    kv.i = src.i;
    kv.f = src.f;
    kv.str = std::string(src.str);
    if (src.type == ValueType::ARRAY) {
      if (src.array_type == ValueType::STRING) {
        kv.strings.assign(src.strings.begin(), src.strings.end());
      } else if (const auto size = layout::fixed_size(src.array_type)) {
        if (src.array_size > layout::kMaxArrayElements || (src.array_size > 0 && src.array_data == nullptr)) {
          if (!impl_->deferred) {
            impl_->deferred = make_error("gguf writer: key '{}': array of {} elements has no data or exceeds 2^30",
                                         src.key, src.array_size);
          }
          return;
        }
        kv.packed_count = src.array_size;
        if (src.array_size > 0) kv.packed.assign(src.array_data, src.array_data + src.array_size * *size);
      }
      // Other element types (ARRAY, unknown ids) are kept and refused by write() with a message naming the key.
    }
    impl_->put(std::move(kv));
  } catch (const std::bad_alloc&) {
    if (!impl_->deferred) impl_->deferred = make_error("gguf writer: out of memory while copying key '{}'", src.key);
  }
}

Status Writer::add_tensor(std::string name, DType type, std::vector<int64_t> ne, Fill fill) {
  try {
    if (name.empty()) return make_error("gguf writer: tensor name is empty");
    if (name.size() > layout::kMaxNameLength) {
      return make_error("gguf writer: tensor '{}': name is {} bytes long (maximum {})", name, name.size(),
                        layout::kMaxNameLength);
    }
    if (impl_->tensor_names.count(name) != 0) return make_error("gguf writer: duplicate tensor name '{}'", name);
    if (ne.empty() || ne.size() > layout::kMaxDims) {
      return make_error("gguf writer: tensor '{}': {} dims (must be 1..{})", name, ne.size(), layout::kMaxDims);
    }
    for (size_t k = 0; k < ne.size(); ++k) {
      if (ne[k] < 0) return make_error("gguf writer: tensor '{}': ne[{}] = {} is negative", name, k, ne[k]);
    }
    const auto info = dtype_info(static_cast<int32_t>(type));
    if (!info) return make_error("gguf writer: tensor '{}': invalid type id {}", name, static_cast<int32_t>(type));
    const auto n_elements = layout::element_count(ne.data(), static_cast<uint32_t>(ne.size()));
    if (!n_elements) return make_error("gguf writer: tensor '{}': element count overflows int64", name);
    if (ne[0] % info->block_elems != 0) {
      return make_error("gguf writer: tensor '{}': ne[0] = {} is not a multiple of the {} block size {}", name, ne[0],
                        info->name, info->block_elems);
    }
    const auto nbytes = layout::byte_size(*info, *n_elements);
    if (!nbytes) return make_error("gguf writer: tensor '{}': byte size overflows", name);
    if (!fill) return make_error("gguf writer: tensor '{}': no fill callback", name);
    impl_->tensor_names.insert(name);
    impl_->tensors.push_back(Impl::Tensor{std::move(name), type, std::move(ne), *nbytes, std::move(fill)});
    return ok_status();
  } catch (const std::bad_alloc&) {
    return make_error("gguf writer: out of memory while adding a tensor");
  }
}

Status Writer::add_tensor_bytes(std::string name, DType type, std::vector<int64_t> ne, std::vector<uint8_t> bytes) {
  try {
    // shared_ptr: Fill is a std::function and must be copyable.
    auto data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
    const std::string label = name;
    Fill fill = [data, label](uint8_t* dst, uint64_t nbytes) -> Status {
      if (data->size() != nbytes) {
        return make_error("has {} bytes of data but its shape needs {}", data->size(), nbytes);
      }
      if (nbytes > 0) std::memcpy(dst, data->data(), nbytes);
      return ok_status();
    };
    STRATA_TRY(add_tensor(std::move(name), type, std::move(ne), std::move(fill)));
    // Catch a size mismatch now rather than at write time.
    const uint64_t expected = impl_->tensors.back().nbytes;
    if (data->size() != expected) {
      impl_->tensor_names.erase(label);
      impl_->tensors.pop_back();
      return make_error("gguf writer: tensor '{}': has {} bytes of data but its shape needs {}", label, data->size(),
                        expected);
    }
    return ok_status();
  } catch (const std::bad_alloc&) {
    return make_error("gguf writer: out of memory while adding a tensor");
  }
}

Status Writer::write(const std::string& path) const {
  try {
    return impl_->write_file(path);
  } catch (const std::bad_alloc&) {
    return make_error("{}: out of memory while writing", path);
  }
}

Result<std::vector<uint8_t>> Writer::write_to_memory() const {
  try {
    MemorySink sink;
    STRATA_TRY(impl_->emit_guarded(sink));
    return std::move(sink.out);
  } catch (const std::bad_alloc&) {
    return make_error("gguf writer: out of memory while writing to memory");
  }
}

}  // namespace strata::gguf
