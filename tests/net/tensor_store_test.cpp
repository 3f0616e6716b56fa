// The worker's tensor cache at the level of TensorStore: chunks must arrive in order, a tensor is
// visible only once complete, names cannot escape the cache folder, and model files are found by
// content hash. (An interrupted push retried through a worker: tests/runtime/worker_hardening_test.)
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "net/model_identity.h"
#include "net/tensor_store.h"
#include "net_test_util.h"

namespace strata::net {
namespace {

namespace fs = std::filesystem;

const std::string kSha(64, 'a');

gguf::TensorInfo tensor(const std::string& name, uint64_t nbytes) {
  gguf::TensorInfo t;
  t.name = name;
  t.type = DType::F32;
  t.n_dims = 1;
  t.ne[0] = static_cast<int64_t>(nbytes / 4);
  t.nbytes = nbytes;
  return t;
}

// Every regular file under `dir`.
std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_regular_file()) out.push_back(it->path());
  }
  return out;
}

std::string bytes_of(const MappedFile& m) { return std::string(reinterpret_cast<const char*>(m.data()), m.size()); }

// A tensor-split member's slice: the runs' bytes arrive back to back and land where they belong in a
// sparse file of the tensor's size; it serves only that slice, and a whole copy serves every slice.
TEST(TensorStore, a_slice_lands_at_its_offsets_and_serves_only_that_slice) {
  testing::ScratchDir dir("store_slice");
  TensorStore store(dir.path().string(), "");
  const gguf::TensorInfo t = tensor("blk.0.ffn_down.weight", 64);
  const model::SliceBytes slice{false, {{4, 4, 0, 1}, {16, 2, 10, 3}}};  // bytes 4-7, 16-17, 26-27, 36-37
  const model::SliceBytes other{false, {{0, 4, 0, 1}}};
  {
    TensorStore::Upload up(store);
    ASSERT_TRUE(up.write_chunk(kSha, t, slice, 0, "ABCDab").ok());
    EXPECT_FALSE(store.has_cached(kSha, t, slice));
    EXPECT_FALSE(up.write_chunk(kSha, t, slice, 5, "x").ok());            // not where it stopped
    EXPECT_FALSE(up.write_chunk(kSha, t, slice, 6, "cdefg").ok());        // past the slice's 10 bytes
    ASSERT_TRUE(up.write_chunk(kSha, t, slice, 6, "cdef").ok());
  }
  EXPECT_TRUE(store.has_cached(kSha, t, slice));
  EXPECT_FALSE(store.has_cached(kSha, t, other));
  EXPECT_FALSE(store.has_cached(kSha, t));  // not the whole tensor
  auto m = store.map_cached(kSha, t, slice);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ((*m)->size(), 64u);
  const std::string got = bytes_of(**m);
  EXPECT_EQ(got.substr(4, 4), "ABCD");
  EXPECT_EQ(got.substr(16, 2), "ab");
  EXPECT_EQ(got.substr(26, 2), "cd");
  EXPECT_EQ(got.substr(36, 2), "ef");
  EXPECT_EQ(got.substr(0, 4), std::string(4, '\0'));  // a hole

  // A slice that reads nothing is complete with one empty chunk.
  const model::SliceBytes none{false, {}};
  TensorStore::Upload up(store);
  ASSERT_TRUE(up.write_chunk(kSha, t, none, 0, "").ok());
  EXPECT_TRUE(store.has_cached(kSha, t, none));

  // Once the whole tensor is cached, it serves every slice.
  ASSERT_TRUE(up.write_chunk(kSha, t, 0, std::string(64, 'w')).ok());
  EXPECT_TRUE(store.has_cached(kSha, t, other));
  auto w = store.map_cached(kSha, t, other);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(bytes_of(**w), std::string(64, 'w'));
}

TEST(TensorStore, chunks_in_order_make_a_cached_tensor) {
  testing::ScratchDir dir("store_order");
  TensorStore store(dir.path().string(), "");
  const gguf::TensorInfo t = tensor("blk.0.attn_q.weight", 16);
  EXPECT_FALSE(store.has_cached(kSha, t));
  EXPECT_FALSE(store.map_cached(kSha, t).ok());
  {
    TensorStore::Upload up(store);
    ASSERT_TRUE(up.write_chunk(kSha, t, 0, "0123456").ok());
    EXPECT_FALSE(store.has_cached(kSha, t));  // not visible while incomplete
    ASSERT_TRUE(up.write_chunk(kSha, t, 7, "789abcdef").ok());
    EXPECT_TRUE(store.has_cached(kSha, t));
  }
  auto m = store.map_cached(kSha, t);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(bytes_of(**m), "0123456789abcdef");
  // Another model's cache does not have it; the same tensor of another size does not match.
  EXPECT_FALSE(store.has_cached(std::string(64, 'b'), t));
  EXPECT_FALSE(store.has_cached(kSha, tensor(t.name, 32)));
  EXPECT_EQ(files_under(dir.path()).size(), 1u);
}

TEST(TensorStore, out_of_order_or_overlong_chunks_are_refused) {
  testing::ScratchDir dir("store_bad");
  TensorStore store(dir.path().string(), "");
  const gguf::TensorInfo t = tensor("w", 8);
  TensorStore::Upload up(store);
  auto gap = up.write_chunk(kSha, t, 4, "abcd");
  ASSERT_FALSE(gap.ok());
  EXPECT_EQ(gap.error().message, "tensor 'w': chunk at offset 4 but 0 bytes were received so far");
  ASSERT_TRUE(up.write_chunk(kSha, t, 0, "abc").ok());
  auto overlap = up.write_chunk(kSha, t, 2, "cd");
  ASSERT_FALSE(overlap.ok());
  EXPECT_EQ(overlap.error().message, "tensor 'w': chunk at offset 2 but 3 bytes were received so far");
  auto past = up.write_chunk(kSha, t, 3, "defgxy");
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().message, "tensor 'w': chunk runs past the tensor's 8 bytes");
  auto whole = up.write_chunk(kSha, t, 0, "123456789");
  ASSERT_FALSE(whole.ok());
  EXPECT_FALSE(store.has_cached(kSha, t));
}

TEST(TensorStore, offset_zero_restarts_the_tensor) {
  testing::ScratchDir dir("store_restart");
  TensorStore store(dir.path().string(), "");
  const gguf::TensorInfo t = tensor("w", 8);
  TensorStore::Upload up(store);
  ASSERT_TRUE(up.write_chunk(kSha, t, 0, "xxxxxx").ok());
  ASSERT_TRUE(up.write_chunk(kSha, t, 0, "abcd").ok());  // from the start again: the old bytes are gone
  auto stale = up.write_chunk(kSha, t, 6, "gh");
  ASSERT_FALSE(stale.ok());
  ASSERT_TRUE(up.write_chunk(kSha, t, 4, "efgh").ok());
  auto m = store.map_cached(kSha, t);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(bytes_of(**m), "abcdefgh");
}

TEST(TensorStore, an_upload_that_ends_incomplete_leaves_no_file) {
  testing::ScratchDir dir("store_incomplete");
  TensorStore store(dir.path().string(), "");
  const gguf::TensorInfo a = tensor("a", 8), b = tensor("b", 8);
  {
    TensorStore::Upload up(store);
    ASSERT_TRUE(up.write_chunk(kSha, a, 0, "abcdefgh").ok());
    ASSERT_TRUE(up.write_chunk(kSha, b, 0, "abc").ok());
    EXPECT_EQ(files_under(dir.path()).size(), 2u);  // a, and b's temporary file
  }
  const auto left = files_under(dir.path());
  ASSERT_EQ(left.size(), 1u);  // the complete tensor stays, the partial one is deleted
  EXPECT_TRUE(store.has_cached(kSha, a));
  EXPECT_FALSE(store.has_cached(kSha, b));
}

TEST(TensorStore, two_uploads_of_one_tensor_do_not_mix_their_bytes) {
  testing::ScratchDir dir("store_two");
  TensorStore store(dir.path().string(), "");
  const gguf::TensorInfo t = tensor("w", 8);
  TensorStore::Upload first(store), second(store);
  ASSERT_TRUE(first.write_chunk(kSha, t, 0, "AAAA").ok());
  ASSERT_TRUE(second.write_chunk(kSha, t, 0, "bbbb").ok());
  // Each continues its own file: offset 4 is right for both.
  ASSERT_TRUE(second.write_chunk(kSha, t, 4, "cccc").ok());
  ASSERT_TRUE(first.write_chunk(kSha, t, 4, "DDDD").ok());
  auto m = store.map_cached(kSha, t);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(bytes_of(**m), "AAAADDDD");  // the last to complete wins, whole
}

TEST(TensorStore, tensor_names_cannot_leave_the_cache_folder) {
  testing::ScratchDir dir("store_names");
  const fs::path cache = dir.path() / "cache";
  TensorStore store(cache.string(), "");
  for (const std::string& name : {std::string("../../escape"), std::string("/etc/passwd"), std::string("a/b"),
                                  std::string(".."), std::string("x\n")}) {
    const gguf::TensorInfo t = tensor(name, 4);
    TensorStore::Upload up(store);
    ASSERT_TRUE(up.write_chunk(kSha, t, 0, "abcd").ok()) << name;
    EXPECT_TRUE(store.has_cached(kSha, t)) << name;
  }
  const auto files = files_under(dir.path());
  EXPECT_EQ(files.size(), 5u);
  for (const fs::path& f : files) {
    EXPECT_EQ(f.parent_path(), cache / "tensors" / kSha) << f;
    EXPECT_EQ(f.filename().string().find_first_not_of("0123456789abcdef"), std::string::npos) << f;
  }
}

TEST(TensorStore, model_files_are_found_by_content_hash) {
  testing::ScratchDir dir("store_models");
  const fs::path models = dir.path() / "models";
  fs::create_directories(models / "sub");
  std::ofstream(models / "one.gguf") << "abc";
  std::ofstream(models / "sub" / "two.gguf") << "another model";
  std::ofstream(models / "notes.txt") << "not a model";
  TensorStore store((dir.path() / "cache").string(), models.string());
  EXPECT_TRUE(store.model_hashes().empty());
  EXPECT_EQ(store.scan_model_dir(), 2u);
  const std::string abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  EXPECT_EQ(store.model_path(abc), (models / "one.gguf").string());
  auto two = file_sha256((models / "sub" / "two.gguf").string(), "");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(store.model_path(*two), (models / "sub" / "two.gguf").string());
  EXPECT_EQ(store.model_path(std::string(64, '0')), "");
  EXPECT_EQ(store.model_hashes().size(), 2u);
  // No model dir: nothing to scan.
  TensorStore none((dir.path() / "cache").string(), "");
  EXPECT_EQ(none.scan_model_dir(), 0u);
}

TEST(TensorStore, mapped_files) {
  testing::ScratchDir dir("mapped");
  auto m = MappedFile::open(dir.write("f", "hello"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(bytes_of(**m), "hello");
  auto empty = MappedFile::open(dir.write("e", ""));
  ASSERT_TRUE(empty.ok()) << empty.error().message;
  EXPECT_EQ((*empty)->size(), 0u);
  const std::string missing = (dir.path() / "missing").string();
  auto bad = MappedFile::open(missing);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, missing + ": cannot open");
}

}  // namespace
}  // namespace strata::net
