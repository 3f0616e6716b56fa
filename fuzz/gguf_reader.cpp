// gguf::File::from_bytes on arbitrary bytes; when the image validates, every key and tensor is read
// through each accessor (typed getters on every key, so the wrong-type paths run too) and every
// tensor's data range is touched, which ASan checks against the image.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "gguf/gguf.h"

namespace {

volatile uint64_t g_sink;  // keeps the reads from being optimized away

void touch_key(const strata::gguf::File& f, const strata::gguf::KeyValue& kv) {
  uint64_t h = kv.key.size() + kv.u + static_cast<uint64_t>(kv.i) + static_cast<uint64_t>(kv.f != 0);
  (void)strata::gguf::value_type_name(kv.type);
  if (f.find(kv.key) == nullptr) __builtin_trap();  // every listed key must be found by name
  if (auto s = f.get_string(kv.key); s.ok()) h += s->size() ? static_cast<uint8_t>(s->back()) : 0;
  if (auto v = f.get_u32(kv.key); v.ok()) h += *v;
  if (auto v = f.get_int(kv.key); v.ok()) h += static_cast<uint64_t>(*v);
  if (auto v = f.get_f32(kv.key); v.ok()) h += *v != 0;
  if (auto v = f.get_bool(kv.key); v.ok()) h += *v;
  if (auto v = f.get_string_or(kv.key, "x"); v.ok()) h += v->size();
  if (auto v = f.get_int_or(kv.key, 1); v.ok()) h += static_cast<uint64_t>(*v);
  if (auto v = f.get_f32_or(kv.key, 1.0f); v.ok()) h += *v != 0;
  if (auto v = f.get_bool_or(kv.key, true); v.ok()) h += *v;
  if (auto a = f.get_int_array(kv.key); a.ok()) {
    for (int64_t x : *a) h += static_cast<uint64_t>(x);
  }
  if (auto a = f.get_f32_array(kv.key); a.ok()) {
    for (float x : *a) h += x != 0;
  }
  if (auto a = f.get_string_array(kv.key); a.ok()) {
    for (std::string_view s : *a) h += s.empty() ? 0 : static_cast<uint8_t>(s.front()) + static_cast<uint8_t>(s.back());
  }
  g_sink = g_sink + h;
}

void touch_tensor(const strata::gguf::File& f, const strata::gguf::TensorInfo& t) {
  if (f.find_tensor(t.name) == nullptr) __builtin_trap();
  uint64_t h = static_cast<uint64_t>(t.n_elements()) + static_cast<uint64_t>(t.n_rows()) + t.n_dims;
  if (t.nbytes > 0) {
    const uint8_t* data = f.tensor_data(t);
    h += data[0] + data[t.nbytes - 1];  // the whole range must lie inside the image
  }
  g_sink = g_sink + h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = strata::gguf::File::from_bytes(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.ok()) return 0;
  const strata::gguf::File& f = **file;
  g_sink = g_sink + f.version() + f.alignment() + f.data_offset() + f.bytes().size();
  for (const auto& kv : f.kvs()) touch_key(f, kv);
  for (const auto& t : f.tensors()) touch_tensor(f, t);
  // Lookups of names that are not there.
  (void)f.find("");
  (void)f.find_tensor("");
  (void)f.get_int_or("general.alignment", 32);
  return 0;
}
