// The reader against the real files in the shared folder: everything opens (except the legacy v1 file,
// which is refused by version), and a few facts about known models hold.
#include <algorithm>
#include <filesystem>

#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "testing/shared_data.h"

namespace strata::gguf {
namespace {

namespace fs = std::filesystem;

// Checks the invariants the rest of Strata relies on after a successful open.
void expect_consistent(const File& f) {
  const uint64_t size = f.bytes().size();
  EXPECT_LE(f.data_offset(), size);
  if (!f.tensors().empty()) {
    EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
  }
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(f.find_tensor(t.name), &t);
    EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
    EXPECT_LE(f.data_offset() + t.offset + t.nbytes, size) << t.name;
    EXPECT_EQ(t.nbytes, row_bytes(t.type, t.ne[0]) * static_cast<uint64_t>(t.n_rows())) << t.name;
  }
  for (const KeyValue& kv : f.kvs()) {
    EXPECT_EQ(f.find(kv.key), &kv);
    if (kv.type == ValueType::ARRAY && kv.array_type == ValueType::STRING) {
      EXPECT_EQ(kv.strings.size(), kv.array_size) << kv.key;
    }
  }
}

TEST(SharedModels, every_shared_gguf_opens_except_legacy_v1) {
  STRATA_SHARED_FILE(stories, "models/stories260K.gguf");
  const fs::path models = fs::path(stories).parent_path();
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(models)) {
    if (entry.is_regular_file() && entry.path().extension() == ".gguf") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 10u) << "expected the shared models (incl. vocab/ and synth/) under " << models;
  int opened = 0;
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.string());
    auto file = File::open(path.string());
    if (path.parent_path().filename() == "legacy") {
      EXPECT_GGUF_ERROR(file, path.string() + ": GGUF version 1 is not supported (only v2 and v3)");
      continue;
    }
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ((*file)->version(), 3u);
    expect_consistent(**file);
    ++opened;
  }
  EXPECT_EQ(opened + 1, static_cast<int>(files.size()));
}

TEST(SharedModels, reader_refuses_v1_with_version_message) {
  STRATA_SHARED_FILE(path, "models/legacy/tinyllamas-stories-260k-f32.gguf");
  auto file = File::open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().message, path + ": GGUF version 1 is not supported (only v2 and v3)");
}

TEST(SharedModels, stories260k_has_known_layout) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto file = File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const File& f = **file;
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.tensors().size(), 48u);
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->n_dims, 2u);
  EXPECT_EQ(embd->ne[0], 64);
  EXPECT_EQ(embd->ne[1], 512);
  EXPECT_EQ(embd->type, DType::F32);
  EXPECT_EQ(embd->nbytes, 64u * 512u * 4u);
  EXPECT_EQ(embd->n_elements(), 64 * 512);
  EXPECT_EQ(f.find_tensor("no.such.tensor"), nullptr);

  EXPECT_EQ(*f.get_string("general.architecture"), "llama");
  EXPECT_EQ(*f.get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(*f.get_int("llama.block_count"), 5);
  EXPECT_GT(*f.get_f32("llama.attention.layer_norm_rms_epsilon"), 0.0f);
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  EXPECT_EQ(tokens->size(), 512u);
  auto scores = f.get_f32_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok()) << scores.error().message;
  EXPECT_EQ(scores->size(), 512u);
  auto types = f.get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok()) << types.error().message;
  EXPECT_EQ(types->size(), 512u);

  // The data pointer is where the header says: the first tensor starts the data section.
  const TensorInfo& first = f.tensors().front();
  EXPECT_EQ(f.tensor_data(first), f.bytes().data() + f.data_offset());
}

TEST(SharedModels, tinystories_q8_0_has_q8_0_tensors) {
  STRATA_SHARED_FILE(path, "models/TinyStories-656K-Q8_0.gguf");
  auto file = File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const File& f = **file;
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, DType::Q8_0);
  EXPECT_EQ(embd->ne[0], 128);
  EXPECT_EQ(embd->ne[1], 2048);
  EXPECT_EQ(embd->nbytes, 128u / 32u * 34u * 2048u);
  const auto q8 = std::count_if(f.tensors().begin(), f.tensors().end(),
                                [](const TensorInfo& t) { return t.type == DType::Q8_0; });
  EXPECT_GT(q8, 0);
  EXPECT_EQ(*f.get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(f.get_string_array("general.languages")->size(), 1u);
}

// The writer reproduces a real file byte for byte when fed its metadata and tensors in order:
// same layout rules (KV order, info order, padding) as the converter that made it.
TEST(SharedModels, rewriting_stories260k_reproduces_identical_bytes) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto file = File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const File& f = **file;
  Writer w;
  for (const KeyValue& kv : f.kvs()) w.copy_kv(kv);
  for (const TensorInfo& t : f.tensors()) {
    const uint8_t* src = f.tensor_data(t);
    auto fill = [src](uint8_t* dst, uint64_t n) -> Status {
      std::memcpy(dst, src, n);
      return ok_status();
    };
    ASSERT_TRUE(w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), fill).ok());
  }
  auto out = w.write_to_memory();
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(out->size(), f.bytes().size());
  EXPECT_TRUE(std::equal(out->begin(), out->end(), f.bytes().begin()));
}

TEST(SharedModels, vocab_only_file_has_no_tensors_and_full_vocab) {
  STRATA_SHARED_FILE(path, "models/vocab/ggml-vocab-gpt-2.gguf");
  auto file = File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_TRUE((*file)->tensors().empty());
  auto tokens = (*file)->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  EXPECT_GT(tokens->size(), 50000u);
}

}  // namespace
}  // namespace strata::gguf
