// A corpus of malformed files, built by patching fields of a small valid file (located through the
// parsed header) or of a real model. Each must be refused with a message that names the file, points
// at a byte, and says what is wrong.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <limits>

#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "testing/shared_data.h"

namespace strata::gguf {
namespace {

using testing::Bytes;
using testing::kv_fields;
using testing::parse;
using testing::patch;
using testing::tensor_fields;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// Refused, with a message that names the file and a byte offset and contains `fragment`.
void expect_refused(const Bytes& bytes, const std::string& fragment) {
  auto file = parse(bytes, "test.gguf");
  ASSERT_FALSE(file.ok()) << "accepted a malformed file; expected an error containing: " << fragment;
  const std::string& msg = file.error().message;
  EXPECT_EQ(msg.rfind("test.gguf: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("byte"), std::string::npos) << "no byte offset in: " << msg;
  EXPECT_NE(msg.find(fragment), std::string::npos) << "message: " << msg << "\nexpected fragment: " << fragment;
}

class Malformed : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = testing::small_file();
    auto parsed = parse(base_);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    file_ = *parsed;
    ASSERT_EQ(file_->tensors().size(), 3u);
  }
  const KeyValue& kv(std::string_view key) const { return *file_->find(key); }
  const TensorInfo& tensor(size_t i) const { return file_->tensors()[i]; }
  // The base file with one field overwritten.
  template <typename T>
  Bytes with(uint64_t at, T value) const {
    Bytes b = base_;
    patch(b, at, value);
    return b;
  }

  Bytes base_;
  std::shared_ptr<const File> file_;
};

TEST_F(Malformed, truncated_at_every_header_byte_is_refused_as_truncated) {
  for (uint64_t end = 0; end < file_->data_offset(); ++end) {
    SCOPED_TRACE(end);
    expect_refused(Bytes(base_.begin(), base_.begin() + static_cast<std::ptrdiff_t>(end)), "truncated");
    if (HasFailure()) return;  // one failing position is enough to see what is wrong
  }
}

TEST_F(Malformed, truncated_inside_tensor_data_is_refused_as_past_end_of_file) {
  const TensorInfo& last = tensor(2);
  const uint64_t data_end = file_->data_offset() + last.offset + last.nbytes;
  for (uint64_t end = file_->data_offset(); end < data_end; ++end) {
    SCOPED_TRACE(end);
    expect_refused(Bytes(base_.begin(), base_.begin() + static_cast<std::ptrdiff_t>(end)), "past the end of the file");
    if (HasFailure()) return;
  }
  // The padding after the last tensor is optional.
  for (uint64_t end = data_end; end <= base_.size(); ++end) {
    EXPECT_TRUE(parse(Bytes(base_.begin(), base_.begin() + static_cast<std::ptrdiff_t>(end))).ok()) << end;
  }
}

TEST_F(Malformed, bad_magic_is_refused) {
  expect_refused(with<uint8_t>(0, 'g'), "bad magic");
  expect_refused(with<uint32_t>(0, 0x46554746), "bad magic at byte 0");
}

TEST_F(Malformed, unsupported_versions_are_refused_with_version_message) {
  expect_refused(with<uint32_t>(4, 0), "version 0 is invalid");
  expect_refused(with<uint32_t>(4, 4), "GGUF version 4 is not supported (only v2 and v3)");
  expect_refused(with<uint32_t>(4, 0xffffffff), "version 4294967295 is not supported");
  expect_refused(with<uint32_t>(4, 0x00030000), "byte-swapped");
  auto v1 = parse(with<uint32_t>(4, 1), "test.gguf");
  ASSERT_FALSE(v1.ok());
  EXPECT_EQ(v1.error().message, "test.gguf: GGUF version 1 is not supported (only v2 and v3)");
}

TEST_F(Malformed, version_2_parses_like_version_3) {
  auto v2 = parse(with<uint32_t>(4, 2));
  ASSERT_TRUE(v2.ok()) << v2.error().message;
  EXPECT_EQ((*v2)->version(), 2u);
  EXPECT_EQ((*v2)->tensors().size(), 3u);
  EXPECT_EQ((*v2)->kvs().size(), file_->kvs().size());
}

TEST_F(Malformed, huge_or_negative_header_counts_are_refused) {
  for (int64_t n : {kI64Max, int64_t{1} << 40, int64_t{1} << 20}) {
    expect_refused(with<int64_t>(8, n), "n_tensors at byte 8: count");
    expect_refused(with<int64_t>(16, n), "n_kv at byte 16: count");
  }
  expect_refused(with<int64_t>(8, -1), "n_tensors at byte 8: count -1 is negative");
  expect_refused(with<int64_t>(16, std::numeric_limits<int64_t>::min()), "n_kv at byte 16: count");
  // More records than present, but still plausible: parsing runs into the next section and fails there.
  auto more = parse(with<int64_t>(16, static_cast<int64_t>(file_->kvs().size() + 1)));
  EXPECT_FALSE(more.ok());
}

TEST_F(Malformed, huge_string_lengths_are_refused) {
  const auto arch = kv_fields(kv("general.architecture"));
  expect_refused(with<uint64_t>(arch.key_len, uint64_t{1} << 31), "key length 2147483648 at byte 24 exceeds the 1 GiB");
  expect_refused(with<uint64_t>(arch.key_len, UINT64_MAX), "exceeds the 1 GiB string limit");
  expect_refused(with<uint64_t>(arch.key_len, uint64_t{1} << 20), "runs past the end of the file");
  expect_refused(with<uint64_t>(arch.value, uint64_t{1} << 30 | 1), "string value length");
  expect_refused(with<uint64_t>(arch.value, base_.size()), "key 'general.architecture'");
  expect_refused(with<uint64_t>(tensor_fields(tensor(0)).name_len, uint64_t{1} << 33), "tensor info #0");
  // A string inside an array names the element.
  const auto tokens = kv_fields(kv("tokenizer.ggml.tokens"));
  expect_refused(with<uint64_t>(tokens.value + 4 + 8, uint64_t{1} << 40), "(element 0 of 4)");
}

TEST_F(Malformed, huge_array_counts_are_refused) {
  const auto tokens = kv_fields(kv("tokenizer.ggml.tokens"));
  const auto types = kv_fields(kv("tokenizer.ggml.token_type"));
  expect_refused(with<uint64_t>(tokens.value + 4, uint64_t{1} << 31), "exceeds the limit of 2^30 elements");
  expect_refused(with<uint64_t>(tokens.value + 4, UINT64_MAX), "array count 18446744073709551615");
  expect_refused(with<uint64_t>(types.value + 4, uint64_t{1} << 30), "truncated");
  expect_refused(with<uint64_t>(types.value + 4, uint64_t{1} << 29), "key 'tokenizer.ggml.token_type'");
  expect_refused(with<uint64_t>(tokens.value + 4, uint64_t{1} << 29), "536870912 string elements need at least 4294967296 bytes");
}

TEST_F(Malformed, unknown_value_types_are_refused) {
  const auto arch = kv_fields(kv("general.architecture"));
  expect_refused(with<int32_t>(arch.type, 13), "unknown value type 13");
  expect_refused(with<int32_t>(arch.type, -1), "unknown value type -1");
  const auto types = kv_fields(kv("tokenizer.ggml.token_type"));
  expect_refused(with<int32_t>(types.value, 13), "unknown array element type 13");
  expect_refused(with<int32_t>(types.value, std::numeric_limits<int32_t>::min()), "unknown array element type");
}

TEST_F(Malformed, nested_arrays_are_refused) {
  const auto types = kv_fields(kv("tokenizer.ggml.token_type"));
  expect_refused(with<int32_t>(types.value, 9), "nested arrays are not supported");
}

TEST_F(Malformed, empty_and_duplicate_keys_are_refused) {
  expect_refused(with<uint64_t>(kv_fields(kv("general.alignment")).key_len, 0), "key is empty");
  // Turn "llama.block_count" into a copy of the key before it... by writing a file with twin keys.
  Writer w;
  w.set_u32("key.a", 1);
  w.set_u32("key.b", 2);
  auto bytes = w.write_to_memory();
  ASSERT_TRUE(bytes.ok());
  auto parsed = parse(*bytes);
  ASSERT_TRUE(parsed.ok());
  Bytes dup = *bytes;
  patch<uint8_t>(dup, kv_fields((*parsed)->kvs()[1]).key + 4, 'a');
  expect_refused(dup, "key 'key.a' (record at byte 45): duplicate key (first defined at byte 24)");
}

TEST_F(Malformed, empty_long_and_duplicate_tensor_names_are_refused) {
  const auto t0 = tensor_fields(tensor(0));
  expect_refused(with<uint64_t>(t0.name_len, 0), "tensor info #0 (at byte");
  expect_refused(with<uint64_t>(t0.name_len, 0), "name is empty");
  expect_refused(with<uint64_t>(t0.name_len, 64), "name is 64 bytes long (maximum 63)");
  Writer w;
  ASSERT_TRUE(w.add_tensor_bytes("t.a", DType::F32, {1}, Bytes(4)).ok());
  ASSERT_TRUE(w.add_tensor_bytes("t.b", DType::F32, {1}, Bytes(4)).ok());
  auto bytes = w.write_to_memory();
  ASSERT_TRUE(bytes.ok());
  auto parsed = parse(*bytes);
  ASSERT_TRUE(parsed.ok());
  Bytes dup = *bytes;
  patch<uint8_t>(dup, (*parsed)->tensors()[1].file_offset + 8 + 2, 'a');
  expect_refused(dup, "tensor 't.a' (info at byte");
  expect_refused(dup, "duplicate tensor name (first defined at byte 24)");
}

TEST_F(Malformed, n_dims_outside_1_to_4_is_refused) {
  const auto t0 = tensor_fields(tensor(0));
  expect_refused(with<uint32_t>(t0.n_dims, 0), fmt::format("n_dims 0 at byte {} is out of range (1..4)", t0.n_dims));
  expect_refused(with<uint32_t>(t0.n_dims, 5), "n_dims 5");
  expect_refused(with<uint32_t>(t0.n_dims, UINT32_MAX), "out of range");
}

TEST_F(Malformed, negative_dims_are_refused) {
  const auto t0 = tensor_fields(tensor(0));
  expect_refused(with<int64_t>(t0.ne0 + 8, -1),
                 fmt::format("tensor 'token_embd.weight' (info at byte {}): ne[1] = -1 at byte {} is negative",
                             tensor(0).file_offset, t0.ne0 + 8));
  expect_refused(with<int64_t>(t0.ne0, std::numeric_limits<int64_t>::min()), "ne[0]");
}

TEST_F(Malformed, element_count_overflow_is_refused) {
  const auto t0 = tensor_fields(tensor(0));
  Bytes b = with<int64_t>(t0.ne0, int64_t{1} << 40);
  patch<int64_t>(b, t0.ne0 + 8, int64_t{1} << 40);
  expect_refused(b, "element count of shape [1099511627776, 1099511627776] overflows int64");
  // A zero dim does not excuse the others: n_elements() multiplies in order and would overflow first.
  Writer w;
  ASSERT_TRUE(w.add_tensor_bytes("empty", DType::F32, {1, 1, 0}, {}).ok());
  auto empty = w.write_to_memory();
  ASSERT_TRUE(empty.ok());
  const auto e = tensor_fields((*parse(*empty))->tensors()[0]);
  patch<int64_t>(*empty, e.ne0, int64_t{1} << 40);
  ASSERT_TRUE(parse(*empty).ok());  // [2^40, 1, 0]: zero elements
  patch<int64_t>(*empty, e.ne0 + 8, int64_t{1} << 40);
  expect_refused(*empty, "element count of shape [1099511627776, 1099511627776, 0] overflows int64");
  // Representable element count, but the byte size is not.
  Bytes c = with<int64_t>(t0.ne0, int64_t{1} << 61);
  patch<int64_t>(c, t0.ne0 + 8, 2);
  expect_refused(c, "byte size overflows");
}

TEST_F(Malformed, unknown_and_removed_type_ids_are_refused) {
  const auto t0 = tensor_fields(tensor(0));
  for (int32_t id : {4, 5, 31, 32, 33, 36, 37, 38, 43, 1000, -1}) {
    SCOPED_TRACE(id);
    expect_refused(with<int32_t>(t0.type, id), fmt::format("type id {} at byte {} is unknown or removed", id, t0.type));
  }
}

TEST_F(Malformed, row_length_not_a_multiple_of_the_block_is_refused) {
  const auto q = tensor_fields(tensor(1));  // Q8_0, ne[0] = 32
  expect_refused(with<int64_t>(q.ne0, 33), "ne[0] = 33 is not a multiple of the Q8_0 block size 32");
  const auto f = tensor_fields(tensor(0));  // F32 {8, 4} retyped as Q4_K
  expect_refused(with<int32_t>(f.type, static_cast<int32_t>(DType::Q4_K)), "block size 256");
}

TEST_F(Malformed, offsets_out_of_range_are_refused) {
  const auto last = tensor_fields(tensor(2));
  expect_refused(with<uint64_t>(last.offset, uint64_t{1} << 60), "offset 1152921504606846976");
  expect_refused(with<uint64_t>(last.offset, UINT64_MAX), "runs past the end of the file");
  expect_refused(with<uint64_t>(last.offset, base_.size()), "tensor 'output_norm.weight'");
  // Larger dims make the data run past the end even though the offset is right.
  expect_refused(with<int64_t>(last.ne0, 8 * 1024), "with 16384 bytes of data runs past the end of the file");
}

TEST_F(Malformed, overlapping_misaligned_gapped_and_reordered_offsets_are_refused) {
  const auto mid = tensor_fields(tensor(1));
  ASSERT_EQ(tensor(1).offset, 128u);
  expect_refused(with<uint64_t>(mid.offset, 0),
                 fmt::format("tensor 'blk.0.attn_q.weight' (info at byte {}): offset 0 at byte {} overlaps previous "
                             "tensor data (expected 128)",
                             tensor(1).file_offset, mid.offset));
  expect_refused(with<uint64_t>(mid.offset, 96), "overlaps previous tensor data");
  expect_refused(with<uint64_t>(mid.offset, 132), "offset 132");
  expect_refused(with<uint64_t>(mid.offset, 132), "is not aligned to 32 (expected 128)");
  expect_refused(with<uint64_t>(mid.offset, 160), "leaves a gap after previous tensor data (expected 128)");
  // Tensors stored in a different order than listed.
  Bytes swapped = with<uint64_t>(mid.offset, tensor(2).offset);
  patch<uint64_t>(swapped, tensor_fields(tensor(2)).offset, tensor(1).offset);
  expect_refused(swapped, "offset");
}

TEST_F(Malformed, bad_alignment_values_and_types_are_refused) {
  const auto align = kv_fields(kv("general.alignment"));
  expect_refused(with<uint32_t>(align.value, 48), "key 'general.alignment' (record at byte");
  expect_refused(with<uint32_t>(align.value, 48), "alignment 48 is not a nonzero power of two");
  expect_refused(with<uint32_t>(align.value, 0), "alignment 0 is not a nonzero power of two");
  expect_refused(with<int32_t>(align.type, static_cast<int32_t>(ValueType::I32)),
                 "alignment must be of type u32, found i32");
  expect_refused(with<int32_t>(align.type, static_cast<int32_t>(ValueType::F32)), "found f32");
  // A valid but different alignment moves the data section and the expected offsets.
  expect_refused(with<uint32_t>(align.value, 64), "offset 224");
}

TEST_F(Malformed, data_past_end_of_file_is_refused) {
  const TensorInfo& last = tensor(2);
  const uint64_t data_end = file_->data_offset() + last.offset + last.nbytes;
  expect_refused(Bytes(base_.begin(), base_.begin() + static_cast<std::ptrdiff_t>(data_end - 1)),
                 fmt::format("data section holds {} bytes from byte {}", last.offset + last.nbytes - 1,
                             file_->data_offset()));
  // Cut between the tensor infos and the aligned data start.
  Bytes no_data(base_.begin(), base_.begin() + static_cast<std::ptrdiff_t>(file_->data_offset() - 1));
  expect_refused(no_data, "data section would start at byte");
}

TEST(MalformedFiles, open_reports_unreadable_paths) {
  EXPECT_GGUF_ERROR(File::open("/nonexistent/model.gguf"), "/nonexistent/model.gguf: cannot open");
  EXPECT_GGUF_ERROR(File::open("/tmp"), "/tmp: not a regular file");
  const std::string empty = (std::filesystem::temp_directory_path() /
                             fmt::format("strata-gguf-empty-{}.gguf", ::getpid())).string();
  const int fd = ::open(empty.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_GGUF_ERROR(File::open(empty), "truncated");
  std::filesystem::remove(empty);
}

// Mutations of a real model: the same checks hold on a large, converter-written header.
TEST(MalformedFiles, mutations_of_stories260k_are_refused) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto real = File::open(path);
  ASSERT_TRUE(real.ok()) << real.error().message;
  const File& f = **real;
  const Bytes base(f.bytes().begin(), f.bytes().end());

  // Truncation at a spread of points through the header (incl. the 512-token vocabulary) and the data.
  for (uint64_t end = 0; end < f.data_offset(); end += 97) {
    SCOPED_TRACE(end);
    expect_refused(Bytes(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(end)), "truncated");
    if (::testing::Test::HasFailure()) return;
  }
  const TensorInfo& last = f.tensors().back();
  const uint64_t data_end = f.data_offset() + last.offset + last.nbytes;
  for (uint64_t end = f.data_offset(); end < data_end; end += (data_end - f.data_offset()) / 37) {
    expect_refused(Bytes(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(end)), "past the end of the file");
  }

  Bytes v1 = base;
  patch<uint32_t>(v1, 4, 1);
  EXPECT_GGUF_ERROR(parse(v1, "test.gguf"), "GGUF version 1 is not supported");
  Bytes gap = base;
  patch<uint64_t>(gap, testing::tensor_fields(f.tensors()[5]).offset, f.tensors()[5].offset + 32);
  expect_refused(gap, "leaves a gap");
  Bytes retyped = base;
  patch<int32_t>(retyped, testing::kv_fields(*f.find("llama.block_count")).type, static_cast<int32_t>(ValueType::I32));
  auto still_ok = parse(retyped);  // same size, so the file stays valid...
  ASSERT_TRUE(still_ok.ok()) << still_ok.error().message;
  EXPECT_GGUF_ERROR((*still_ok)->get_u32("llama.block_count"), "expected u32, found i32");  // ...but strictly typed
  EXPECT_EQ(*(*still_ok)->get_int("llama.block_count"), 5);
}

}  // namespace
}  // namespace strata::gguf
