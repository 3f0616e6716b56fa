// Writer round trips (what the writer writes, the reader reads back identically) and writer-side
// validation, including the "no partial file on failure" guarantee.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace strata::gguf {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;
using testing::parse;

// A fresh empty directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            fmt::format("strata-gguf-{}-{}-{}", ::getpid(), info->test_suite_name(), info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  size_t entry_count() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(path_), fs::directory_iterator()));
  }

 private:
  fs::path path_;
};

KeyValue scalar(std::string key, ValueType type) {
  KeyValue kv;
  kv.key = std::move(key);
  kv.type = type;
  return kv;
}

KeyValue packed_array(std::string key, ValueType elem, const void* data, uint64_t count) {
  KeyValue kv = scalar(std::move(key), ValueType::ARRAY);
  kv.array_type = elem;
  kv.array_size = count;
  kv.array_data = static_cast<const uint8_t*>(data);
  return kv;
}

Bytes pattern(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t k = 0; k < n; ++k) b[k] = static_cast<uint8_t>(seed * 31 + k * 7);
  return b;
}

TEST(Writer, round_trip_preserves_every_value_type) {
  Writer w;
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -123456);
  w.set_u64("t.u64", 0xfedcba9876543210ull);
  w.set_f32("t.f32", 3.25f);
  w.set_bool("t.bool_true", true);
  w.set_bool("t.bool_false", false);
  w.set_string("t.string", "héllo wörld");
  w.set_string("t.empty_string", "");
  w.set_i32_array("t.i32_array", {1, -2, 2147483647, std::numeric_limits<int32_t>::min()});
  w.set_f32_array("t.f32_array", {0.5f, -1.0f, 1e-6f});
  w.set_string_array("t.string_array", {"a", "", "ccc"});
  w.set_i32_array("t.empty_array", {});

  // Types without a dedicated setter go through copy_kv.
  KeyValue u8 = scalar("t.u8", ValueType::U8);
  u8.u = 250;
  KeyValue i8 = scalar("t.i8", ValueType::I8);
  i8.i = -100;
  KeyValue u16 = scalar("t.u16", ValueType::U16);
  u16.u = 65000;
  KeyValue i16 = scalar("t.i16", ValueType::I16);
  i16.i = -30000;
  KeyValue i64 = scalar("t.i64", ValueType::I64);
  i64.i = std::numeric_limits<int64_t>::min();
  KeyValue f64 = scalar("t.f64", ValueType::F64);
  f64.f = 2.718281828459045;
  for (const KeyValue* kv : {&u8, &i8, &u16, &i16, &i64, &f64}) w.copy_kv(*kv);
  const uint8_t bools[] = {1, 0, 1};
  const uint16_t u16s[] = {1, 65535};
  const int64_t i64s[] = {-1, std::numeric_limits<int64_t>::max()};
  const uint64_t u64s[] = {7, 1ull << 40};
  const double f64s[] = {1.5, -2.25};
  w.copy_kv(packed_array("t.bool_array", ValueType::BOOL, bools, 3));
  w.copy_kv(packed_array("t.u16_array", ValueType::U16, u16s, 2));
  w.copy_kv(packed_array("t.i64_array", ValueType::I64, i64s, 2));
  w.copy_kv(packed_array("t.u64_array", ValueType::U64, u64s, 2));
  w.copy_kv(packed_array("t.f64_array", ValueType::F64, f64s, 2));

  auto bytes = w.write_to_memory();
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto file = parse(*bytes);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const File& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.kvs().size(), 23u);
  EXPECT_TRUE(f.tensors().empty());

  EXPECT_EQ(*f.get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(*f.get_int("t.i32"), -123456);
  EXPECT_EQ(f.find("t.u64")->u, 0xfedcba9876543210ull);
  EXPECT_EQ(*f.get_f32("t.f32"), 3.25f);
  EXPECT_TRUE(*f.get_bool("t.bool_true"));
  EXPECT_FALSE(*f.get_bool("t.bool_false"));
  EXPECT_EQ(*f.get_string("t.string"), "héllo wörld");
  EXPECT_EQ(*f.get_string("t.empty_string"), "");
  EXPECT_EQ(*f.get_int_array("t.i32_array"),
            (std::vector<int64_t>{1, -2, 2147483647, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(*f.get_f32_array("t.f32_array"), (std::vector<float>{0.5f, -1.0f, 1e-6f}));
  auto strings = f.get_string_array("t.string_array");
  ASSERT_TRUE(strings.ok());
  EXPECT_EQ(std::vector<std::string_view>(strings->begin(), strings->end()),
            (std::vector<std::string_view>{"a", "", "ccc"}));
  EXPECT_TRUE(f.get_int_array("t.empty_array")->empty());

  EXPECT_EQ(*f.get_int("t.u8"), 250);
  EXPECT_EQ(*f.get_int("t.i8"), -100);
  EXPECT_EQ(*f.get_int("t.u16"), 65000);
  EXPECT_EQ(*f.get_int("t.i16"), -30000);
  EXPECT_EQ(*f.get_int("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.find("t.f64")->type, ValueType::F64);
  EXPECT_EQ(f.find("t.f64")->f, 2.718281828459045);
  EXPECT_EQ(*f.get_int_array("t.bool_array"), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(*f.get_int_array("t.u16_array"), (std::vector<int64_t>{1, 65535}));
  EXPECT_EQ(*f.get_int_array("t.i64_array"), (std::vector<int64_t>{-1, std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(*f.get_int_array("t.u64_array"), (std::vector<int64_t>{7, int64_t{1} << 40}));
  const KeyValue* f64a = f.find("t.f64_array");
  ASSERT_NE(f64a, nullptr);
  EXPECT_EQ(f64a->array_type, ValueType::F64);
  EXPECT_EQ(std::memcmp(f64a->array_data, f64s, sizeof f64s), 0);

  // Copying every entry of the parsed file into a new writer reproduces the same bytes.
  Writer copy;
  for (const KeyValue& kv : f.kvs()) copy.copy_kv(kv);
  auto again = copy.write_to_memory();
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(*again, *bytes);
}

TEST(Writer, round_trip_preserves_tensors_of_several_types) {
  struct Spec {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
  };
  const std::vector<Spec> specs = {
      {"f32.3d", DType::F32, {3, 5, 2}},        {"f16.vec", DType::F16, {7}},
      {"bf16.mat", DType::BF16, {4, 3}},         {"q8_0.mat", DType::Q8_0, {64, 3}},
      {"q4_k.mat", DType::Q4_K, {256, 2}},       {"q4_0.4d", DType::Q4_0, {32, 2, 2, 2}},
      {"i32.vec", DType::I32, {5}},              {"empty", DType::F32, {0, 4}},
  };
  Writer w;
  w.set_string("general.architecture", "test");
  std::vector<Bytes> data;
  for (size_t k = 0; k < specs.size(); ++k) {
    size_t rows = 1;
    for (size_t d = 1; d < specs[k].ne.size(); ++d) rows *= static_cast<size_t>(specs[k].ne[d]);
    data.push_back(pattern(row_bytes(specs[k].type, specs[k].ne[0]) * rows, static_cast<uint8_t>(k)));
    ASSERT_TRUE(w.add_tensor_bytes(specs[k].name, specs[k].type, specs[k].ne, data.back()).ok());
  }
  auto bytes = w.write_to_memory();
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto file = parse(*bytes);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const File& f = **file;
  ASSERT_EQ(f.tensors().size(), specs.size());
  EXPECT_EQ(f.data_offset() % 32, 0u);
  for (size_t k = 0; k < specs.size(); ++k) {
    SCOPED_TRACE(specs[k].name);
    const TensorInfo& t = f.tensors()[k];  // written in the order added
    EXPECT_EQ(t.name, specs[k].name);
    EXPECT_EQ(t.type, specs[k].type);
    ASSERT_EQ(t.n_dims, specs[k].ne.size());
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < specs[k].ne.size() ? specs[k].ne[d] : 1);
    EXPECT_EQ(t.offset % 32, 0u);
    ASSERT_EQ(t.nbytes, data[k].size());
    EXPECT_EQ(Bytes(f.tensor_data(t), f.tensor_data(t) + t.nbytes), data[k]);
  }
}

TEST(Writer, custom_alignment_is_applied_to_data_section_and_offsets) {
  for (uint32_t alignment : {1u, 8u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    Writer w;
    w.set_u32("general.alignment", alignment);
    ASSERT_TRUE(w.add_tensor_bytes("a", DType::F32, {3}, pattern(12, 1)).ok());
    ASSERT_TRUE(w.add_tensor_bytes("b", DType::F16, {5}, pattern(10, 2)).ok());
    ASSERT_TRUE(w.add_tensor_bytes("c", DType::Q8_0, {32}, pattern(34, 3)).ok());
    auto bytes = w.write_to_memory();
    ASSERT_TRUE(bytes.ok()) << bytes.error().message;
    auto file = parse(*bytes);
    ASSERT_TRUE(file.ok()) << file.error().message;
    const File& f = **file;
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.data_offset() % alignment, 0u);
    EXPECT_EQ(f.tensors()[1].offset, (12 + alignment - 1) / alignment * alignment);
    for (const TensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % alignment, 0u) << t.name;
    // Padding is zeros.
    const TensorInfo& a = f.tensors()[0];
    for (uint64_t p = a.nbytes; p < f.tensors()[1].offset; ++p) EXPECT_EQ(f.tensor_data(a)[p], 0) << p;
    EXPECT_EQ(Bytes(f.tensor_data(f.tensors()[2]), f.tensor_data(f.tensors()[2]) + 34), pattern(34, 3));
  }
}

TEST(Writer, write_to_file_round_trips_through_mmap) {
  TempDir dir;
  const std::string path = (dir / "model.gguf").string();
  const Bytes expected = testing::small_file();
  auto parsed = parse(expected);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  Writer w;
  for (const KeyValue& kv : (*parsed)->kvs()) w.copy_kv(kv);
  for (const TensorInfo& t : (*parsed)->tensors()) {
    ASSERT_TRUE(w.add_tensor_bytes(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                                   Bytes((*parsed)->tensor_data(t), (*parsed)->tensor_data(t) + t.nbytes))
                    .ok());
  }
  Status written = w.write(path);
  ASSERT_TRUE(written.ok()) << written.error().message;
  EXPECT_EQ(dir.entry_count(), 1u) << "the temporary file must be renamed, not left behind";
  auto file = File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(Bytes((*file)->bytes().begin(), (*file)->bytes().end()), expected);
  EXPECT_EQ(*(*file)->get_string("general.architecture"), "llama");
}

TEST(Writer, failed_fill_leaves_no_file_behind) {
  TempDir dir;
  const std::string path = (dir / "model.gguf").string();
  Writer w;
  ASSERT_TRUE(w.add_tensor_bytes("ok", DType::F32, {4}, pattern(16, 1)).ok());
  ASSERT_TRUE(w.add_tensor("bad", DType::F32, {4}, [](uint8_t*, uint64_t) -> Status {
                 return make_error("source went away");
               }).ok());
  Status written = w.write(path);
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.error().message.find("tensor 'bad': source went away"), std::string::npos)
      << written.error().message;
  EXPECT_EQ(dir.entry_count(), 0u);
}

TEST(Writer, throwing_fill_is_an_error_not_an_exception) {
  TempDir dir;
  Writer w;
  ASSERT_TRUE(w.add_tensor("t", DType::F32, {4}, [](uint8_t*, uint64_t) -> Status {
                 throw std::runtime_error("boom");
               }).ok());
  Status written = w.write((dir / "x.gguf").string());
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.error().message.find("boom"), std::string::npos);
  EXPECT_EQ(dir.entry_count(), 0u);
  EXPECT_FALSE(w.write_to_memory().ok());
}

TEST(Writer, write_into_missing_directory_fails_with_path) {
  Writer w;
  Status written = w.write("/nonexistent-strata-dir/model.gguf");
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.error().message.find("/nonexistent-strata-dir/model.gguf"), std::string::npos);
}

TEST(Writer, refuses_invalid_tensors) {
  Writer w;
  auto fill = [](uint8_t*, uint64_t) { return ok_status(); };
  ASSERT_TRUE(w.add_tensor("t", DType::F32, {4}, fill).ok());
  EXPECT_GGUF_ERROR(w.add_tensor("t", DType::F32, {4}, fill), "duplicate tensor name 't'");
  EXPECT_GGUF_ERROR(w.add_tensor("", DType::F32, {4}, fill), "name is empty");
  EXPECT_GGUF_ERROR(w.add_tensor(std::string(64, 'x'), DType::F32, {4}, fill), "64 bytes long");
  EXPECT_GGUF_ERROR(w.add_tensor("d0", DType::F32, {}, fill), "0 dims");
  EXPECT_GGUF_ERROR(w.add_tensor("d5", DType::F32, {1, 1, 1, 1, 1}, fill), "5 dims");
  EXPECT_GGUF_ERROR(w.add_tensor("neg", DType::F32, {4, -1}, fill), "ne[1] = -1 is negative");
  EXPECT_GGUF_ERROR(w.add_tensor("blk", DType::Q4_K, {255}, fill), "not a multiple of the Q4_K block size 256");
  EXPECT_GGUF_ERROR(w.add_tensor("ovf", DType::F32, {int64_t{1} << 40, int64_t{1} << 40}, fill), "overflows");
  EXPECT_GGUF_ERROR(w.add_tensor("big", DType::F64, {int64_t{1} << 62}, fill), "byte size overflows");
  EXPECT_GGUF_ERROR(w.add_tensor("bad_type", static_cast<DType>(4), {4}, fill), "invalid type id 4");
  EXPECT_GGUF_ERROR(w.add_tensor_bytes("short", DType::F32, {4}, Bytes(15)), "has 15 bytes of data but its shape needs 16");
  // A refused tensor leaves no trace: the same name can be added afterwards.
  EXPECT_TRUE(w.add_tensor_bytes("short", DType::F32, {4}, Bytes(16)).ok());
}

TEST(Writer, refuses_bad_alignment_and_bad_copied_values_at_write) {
  {
    Writer w;
    w.set_u32("general.alignment", 48);
    EXPECT_GGUF_ERROR(w.write_to_memory(), "not a nonzero power of two");
  }
  {
    Writer w;
    w.set_i32("general.alignment", 32);
    EXPECT_GGUF_ERROR(w.write_to_memory(), "general.alignment must be u32, found i32");
  }
  {
    Writer w;
    w.copy_kv(scalar("nested", ValueType::ARRAY));  // array_type defaults to U8: fine, empty
    KeyValue nested = scalar("nested2", ValueType::ARRAY);
    nested.array_type = ValueType::ARRAY;
    w.copy_kv(nested);
    EXPECT_GGUF_ERROR(w.write_to_memory(), "key 'nested2': unsupported array element type 9");
  }
  {
    Writer w;
    w.set_u32("", 1);
    EXPECT_GGUF_ERROR(w.write_to_memory(), "metadata key is empty");
  }
}

TEST(Writer, setting_a_key_twice_replaces_the_value_in_place) {
  Writer w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_f32("a", 2.0f);
  auto bytes = w.write_to_memory();
  ASSERT_TRUE(bytes.ok());
  auto file = parse(*bytes);
  ASSERT_TRUE(file.ok()) << file.error().message;
  ASSERT_EQ((*file)->kvs().size(), 2u);
  EXPECT_EQ((*file)->kvs()[0].key, "a");
  EXPECT_EQ(*(*file)->get_f32("a"), 2.0f);
}

TEST(Writer, copies_share_state_and_empty_writer_gives_header_only_file) {
  Writer w;
  auto bytes = w.write_to_memory();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), 24u);  // magic, version, n_tensors, n_kv
  auto file = parse(*bytes);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_TRUE((*file)->kvs().empty());
  EXPECT_EQ((*file)->data_offset(), 24u);
}

// ---- Typed getters -------------------------------------------------------------------------------

class Getters : public ::testing::Test {
 protected:
  void SetUp() override {
    Writer w;
    w.set_u32("u32", 7);
    w.set_i32("i32", -7);
    w.set_u64("u64.small", 9);
    w.set_u64("u64.huge", std::numeric_limits<uint64_t>::max());
    w.set_f32("f32", 1.5f);
    w.set_bool("bool", true);
    w.set_string("string", "text");
    w.set_i32_array("i32s", {1, 2});
    w.set_f32_array("f32s", {1.0f});
    w.set_string_array("strings", {"x"});
    const uint64_t big[] = {1, std::numeric_limits<uint64_t>::max()};
    w.copy_kv(packed_array("u64s.huge", ValueType::U64, big, 2));
    const uint8_t u8s[] = {200, 1};
    w.copy_kv(packed_array("u8s", ValueType::U8, u8s, 2));
    auto bytes = w.write_to_memory();
    ASSERT_TRUE(bytes.ok());
    auto parsed = parse(*bytes, "getters.gguf");
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    file_ = *parsed;
  }
  std::shared_ptr<const File> file_;
};

TEST_F(Getters, strict_scalar_getters_name_key_expected_and_actual_type) {
  EXPECT_EQ(*file_->get_u32("u32"), 7u);
  EXPECT_GGUF_ERROR(file_->get_u32("i32"), "getters.gguf: key 'i32' (record at byte");
  EXPECT_GGUF_ERROR(file_->get_u32("i32"), "expected u32, found i32");
  EXPECT_GGUF_ERROR(file_->get_u32("u64.small"), "expected u32, found u64");
  EXPECT_GGUF_ERROR(file_->get_f32("u32"), "expected f32, found u32");
  EXPECT_GGUF_ERROR(file_->get_bool("u32"), "expected bool, found u32");
  EXPECT_GGUF_ERROR(file_->get_string("i32s"), "expected string, found array of i32");
  EXPECT_EQ(*file_->get_f32("f32"), 1.5f);
  EXPECT_TRUE(*file_->get_bool("bool"));
  EXPECT_EQ(*file_->get_string("string"), "text");
}

TEST_F(Getters, get_int_accepts_any_integer_that_fits_int64) {
  EXPECT_EQ(*file_->get_int("u32"), 7);
  EXPECT_EQ(*file_->get_int("i32"), -7);
  EXPECT_EQ(*file_->get_int("u64.small"), 9);
  EXPECT_GGUF_ERROR(file_->get_int("u64.huge"), "does not fit in int64");
  EXPECT_GGUF_ERROR(file_->get_int("bool"), "expected an integer, found bool");
  EXPECT_GGUF_ERROR(file_->get_int("f32"), "expected an integer, found f32");
}

TEST_F(Getters, missing_keys_fail_unless_a_fallback_is_given) {
  EXPECT_FALSE(file_->has("nope"));
  EXPECT_GGUF_ERROR(file_->get_u32("nope"), "getters.gguf: key 'nope' not found");
  EXPECT_GGUF_ERROR(file_->get_int_array("nope"), "not found");
  EXPECT_EQ(*file_->get_int_or("nope", 42), 42);
  EXPECT_EQ(*file_->get_f32_or("nope", 0.25f), 0.25f);
  EXPECT_EQ(*file_->get_bool_or("nope", true), true);
  EXPECT_EQ(*file_->get_string_or("nope", "fb"), "fb");
  // A present key of the wrong type is still an error.
  EXPECT_GGUF_ERROR(file_->get_int_or("f32", 1), "expected an integer");
  EXPECT_GGUF_ERROR(file_->get_f32_or("u32", 1), "expected f32");
  EXPECT_GGUF_ERROR(file_->get_bool_or("u32", true), "expected bool");
  EXPECT_GGUF_ERROR(file_->get_string_or("u32", ""), "expected string");
  EXPECT_EQ(*file_->get_int_or("i32", 0), -7);
}

TEST_F(Getters, array_getters_check_element_types) {
  EXPECT_EQ(*file_->get_int_array("i32s"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*file_->get_int_array("u8s"), (std::vector<int64_t>{200, 1}));
  EXPECT_GGUF_ERROR(file_->get_int_array("u64s.huge"), "element 1 does not fit in int64");
  EXPECT_GGUF_ERROR(file_->get_int_array("f32s"), "expected array of integers, found array of f32");
  EXPECT_GGUF_ERROR(file_->get_int_array("u32"), "expected array of integers, found u32");
  EXPECT_EQ(*file_->get_f32_array("f32s"), (std::vector<float>{1.0f}));
  EXPECT_GGUF_ERROR(file_->get_f32_array("i32s"), "expected array of f32, found array of i32");
  EXPECT_EQ(file_->get_string_array("strings")->size(), 1u);
  EXPECT_GGUF_ERROR(file_->get_string_array("i32s"), "expected array of string, found array of i32");
}

TEST(ValueTypeName, names_every_type_and_unknown_ids) {
  EXPECT_EQ(value_type_name(ValueType::U8), "u8");
  EXPECT_EQ(value_type_name(ValueType::STRING), "string");
  EXPECT_EQ(value_type_name(ValueType::ARRAY), "array");
  EXPECT_EQ(value_type_name(ValueType::F64), "f64");
  EXPECT_EQ(value_type_name(static_cast<ValueType>(99)), "unknown");
}

}  // namespace
}  // namespace strata::gguf
