// What identifies a model between nodes: the content hash (and its memo), the metadata image, and
// tensor shapes on the wire (received ones are validated).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "net/model_identity.h"
#include "net_test_util.h"

namespace strata::net {
namespace {

namespace fs = std::filesystem;

constexpr const char* kShaAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* kShaEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

TEST(ModelIdentity, sha256_of_small_files) {
  testing::ScratchDir dir("sha");
  auto abc = file_sha256(dir.write("abc", "abc"), "");
  ASSERT_TRUE(abc.ok()) << abc.error().message;
  EXPECT_EQ(*abc, kShaAbc);
  auto empty = file_sha256(dir.write("empty", ""), "");
  ASSERT_TRUE(empty.ok()) << empty.error().message;
  EXPECT_EQ(*empty, kShaEmpty);
  // Larger than the 1 MiB read buffer: the same as hashing it in one go would give.
  const std::string big(3 << 20, 'a');
  auto a = file_sha256(dir.write("big", big), "");
  auto b = file_sha256(dir.write("big2", big), "");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *abc);
  const std::string missing = (dir.path() / "missing").string();
  auto m = file_sha256(missing, "");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message, missing + ": cannot stat");
}

TEST(ModelIdentity, sha256_is_memoized_by_path_size_and_mtime) {
  testing::ScratchDir dir("sha_memo");
  const std::string cache = (dir.path() / "cache").string();
  const std::string path = dir.write("model", "abc");
  auto first = file_sha256(path, cache);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(*first, kShaAbc);
  ASSERT_TRUE(fs::is_directory(fs::path(cache) / "hashes"));
  size_t memos = 0;
  for (const auto& e : fs::directory_iterator(fs::path(cache) / "hashes")) {
    ++memos;
    std::ifstream in(e.path());
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, kShaAbc);
  }
  EXPECT_EQ(memos, 1u);
  EXPECT_EQ(*file_sha256(path, cache), kShaAbc);
  // Other content (size and mtime change): hashed again, not taken from the memo.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  dir.write("model", "");
  auto changed = file_sha256(path, cache);
  ASSERT_TRUE(changed.ok()) << changed.error().message;
  EXPECT_EQ(*changed, kShaEmpty);
}

TEST(ModelIdentity, metadata_image_keeps_every_key_but_the_tokenizer_and_no_tensors) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  w.set_string("tokenizer.ggml.model", "llama");
  ASSERT_TRUE(w.add_tensor_bytes("token_embd.weight", DType::F32, {2, 2}, std::vector<uint8_t>(16, 0)).ok());
  auto bytes = w.write_to_memory();
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto file = gguf::File::from_bytes(*bytes, "model.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;

  auto image = metadata_image(**file);
  ASSERT_TRUE(image.ok()) << image.error().message;
  auto meta = gguf::File::from_bytes(*image, "metadata");
  ASSERT_TRUE(meta.ok()) << meta.error().message;
  EXPECT_TRUE((*meta)->tensors().empty());
  std::vector<std::string> keys;
  for (const auto& kv : (*meta)->kvs()) keys.push_back(kv.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"general.architecture", "llama.block_count", "llama.rope.freq_base"}));
  auto arch = (*meta)->get_string("general.architecture");
  ASSERT_TRUE(arch.ok());
  EXPECT_EQ(*arch, "llama");
  // The same file gives the same image (coordinator and worker compare them).
  auto again = metadata_image(**file);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *image);
}

v1::TensorSpec spec_of(const std::string& name, DType type, std::vector<int64_t> ne, uint64_t nbytes) {
  v1::TensorSpec s;
  s.set_name(name);
  s.set_type(static_cast<int32_t>(type));
  for (int64_t n : ne) s.add_ne(n);
  s.set_nbytes(nbytes);
  return s;
}

TEST(ModelIdentity, tensor_shapes_round_trip_through_the_proto) {
  gguf::TensorInfo t;
  t.name = "blk.0.attn_q.weight";
  t.type = DType::Q8_0;
  t.n_dims = 2;
  t.ne[0] = 64;
  t.ne[1] = 3;
  t.nbytes = 3 * 2 * 34;
  v1::TensorSpec spec;
  to_proto(t, &spec);
  auto back = from_proto(spec);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->name, t.name);
  EXPECT_EQ(back->type, t.type);
  EXPECT_EQ(back->n_dims, 2u);
  EXPECT_EQ(back->ne[0], 64);
  EXPECT_EQ(back->ne[1], 3);
  EXPECT_EQ(back->nbytes, t.nbytes);
}

TEST(ModelIdentity, malformed_tensor_shapes_are_refused) {
  const struct {
    v1::TensorSpec spec;
    const char* why;
  } cases[] = {
      {spec_of("", DType::F32, {4}, 16), "is empty or too long"},
      {spec_of(std::string(64, 'x'), DType::F32, {4}, 16), "is empty or too long"},
      {spec_of("t", static_cast<DType>(4), {4}, 16), "unknown type id 4"},
      {spec_of("t", static_cast<DType>(1000), {4}, 16), "unknown type id 1000"},
      {spec_of("t", DType::F32, {}, 0), "0 dimensions"},
      {spec_of("t", DType::F32, {1, 1, 1, 1, 1}, 4), "5 dimensions"},
      {spec_of("t", DType::F32, {-1}, 0), "dimension -1 out of range"},
      {spec_of("t", DType::F32, {int64_t{1} << 41}, 0), "out of range"},
      {spec_of("t", DType::F32, {int64_t{1} << 40, int64_t{1} << 40}, 0), "too many elements"},
      {spec_of("t", DType::Q8_0, {33}, 34), "row not a multiple of the block"},
      {spec_of("t", DType::F32, {4, 2}, 31), "31 bytes declared, shape gives 32"},
  };
  for (const auto& c : cases) {
    auto r = from_proto(c.spec);
    ASSERT_FALSE(r.ok()) << c.why;
    EXPECT_NE(r.error().message.find(c.why), std::string::npos) << r.error().message;
  }
  EXPECT_TRUE(from_proto(spec_of("t", DType::F32, {4, 2}, 32)).ok());
  EXPECT_TRUE(from_proto(spec_of("t", DType::F32, {0, 2}, 0)).ok());  // an empty tensor is a valid shape
}

TEST(ModelIdentity, default_cache_dir_follows_the_environment) {
  const char* saved = std::getenv("STRATA_CACHE_DIR");
  const std::string keep = saved ? saved : "";
  ::setenv("STRATA_CACHE_DIR", "/tmp/strata-cache-test", 1);
  EXPECT_EQ(default_cache_dir(), "/tmp/strata-cache-test");
  ::unsetenv("STRATA_CACHE_DIR");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) {
    EXPECT_EQ(default_cache_dir(), std::string(xdg) + "/strata");
  }
  if (saved) ::setenv("STRATA_CACHE_DIR", keep.c_str(), 1);
}

}  // namespace
}  // namespace strata::net
