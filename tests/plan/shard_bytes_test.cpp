// A tensor-split member without the model file receives only the bytes its slice reads
// (shard_slice_bytes). Built from a sparse copy of the file that holds only those bytes (garbage
// everywhere else), every member must compute the same bits as from the whole file; and the members'
// runs must cover each cut tensor exactly once between them, so nothing is sent twice.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "plan/shards.h"
#include "model/model.h"
#include "model/shard.h"
#include "model/stage_runner.h"
#include "testing/golden.h"
#include "testing/shared_data.h"
#include "testing/thread_group.h"

namespace strata::model {
namespace {

using plan::ExpertSplit;
using plan::expert_split_name;
using plan::split_shards;

StageConfig member_config(const Model& m, const Shard& s) {
  StageConfig c;
  c.owned.assign(m.hparams().n_layer, 1);
  c.input = s.index == 0;  // member 0 embeds, as the coordinator does; the others only run slices
  c.output = true;
  c.n_ctx_per_seq = 64;
  c.n_batch = 64;
  c.shard = s;
  c.tensors = tensors_needed(m, c.owned, c.input, true);
  return c;
}

// Owns a read-only mapping.
struct Mapping {
  void* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data) ::munmap(data, size);
  }
};

// `m` with only the bytes `c` reads of each of its tensors in place: a file of the tensors at page
// boundaries, 0xA5 wherever a slice does not read, mapped as a worker maps its cache.
std::shared_ptr<const Model> sparse_copy(const std::string& model_path, const Model& m, const StageConfig& c,
                                         const std::string& path) {
  const std::map<std::string, const Model::Tensor*> by_name = [&] {
    std::map<std::string, const Model::Tensor*> out;
    for (const Model::Tensor& t : m.tensors()) out[t.decl.name] = &t;
    return out;
  }();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  EXPECT_GE(fd, 0);
  std::map<std::string, uint64_t> offsets;
  uint64_t end = 0;
  for (const std::string& name : c.tensors) {
    const Model::Tensor& t = *by_name.at(name);
    const SliceBytes slice = shard_slice_bytes(m.hparams(), t.decl, *t.info, c.shard, c.input);
    EXPECT_TRUE(check_slice_bytes(slice, t.info->nbytes).ok()) << name;
    std::vector<uint8_t> bytes(t.info->nbytes, 0xA5);
    for_each_piece(slice, 0, slice.bytes(t.info->nbytes),
                   [&](uint64_t at, uint64_t, uint64_t n) { std::copy_n(t.data + at, n, bytes.data() + at); });
    offsets[name] = end;
    EXPECT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(end)), static_cast<ssize_t>(bytes.size()));
    end += (t.info->nbytes + 4095) / 4096 * 4096;
  }
  auto map = std::make_shared<Mapping>();
  map->size = std::max<uint64_t>(end, 4096);
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(map->size)), 0);
  map->data = ::mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  EXPECT_NE(map->data, MAP_FAILED);
  auto metadata = gguf::File::open(model_path);
  EXPECT_TRUE(metadata.ok());
  auto copy = Model::assemble(
      *metadata, m.all_infos(),
      [&](const gguf::TensorInfo& t) -> const uint8_t* {
        auto it = offsets.find(t.name);
        return it == offsets.end() ? nullptr : static_cast<const uint8_t*>(map->data) + it->second;
      },
      {map});
  EXPECT_TRUE(copy.ok()) << copy.error().message;
  return *copy;
}

// Each member's logits (its vocabulary rows) from its own model, run together over threads.
std::vector<std::vector<float>> member_logits(const std::vector<std::shared_ptr<const Model>>& models,
                                              const std::vector<StageConfig>& configs, const std::vector<Batch>& batches,
                                              const std::vector<std::vector<float>>& embeddings) {
  const int32_t n = static_cast<int32_t>(models.size());
  std::vector<std::vector<float>> out(n);
  testing::ThreadGroup group(n);
  std::vector<std::thread> members;
  for (int32_t i = 0; i < n; ++i) {
    members.emplace_back([&, i] {
      auto r = StageRunner::create(models[i], configs[i]);
      ASSERT_TRUE(r.ok()) << r.error().message;
      testing::ThreadGroup::Member link(group, i);
      (*r)->set_collective(&link);
      // The prompt, then single-token steps (the decode kernels) on its KV cache.
      for (size_t step = 0; step < embeddings.size(); ++step) {
        std::vector<float> hidden = embeddings[step];
        ASSERT_TRUE((*r)->run_layers(batches[step], 0, models[i]->hparams().n_layer, hidden.data()).ok());
        const std::vector<float> l = (*r)->logits(batches[step], hidden.data());
        out[i].insert(out[i].end(), l.begin(), l.end());
      }
    });
  }
  for (auto& t : members) t.join();
  return out;
}

void check_model(const std::string& name, const std::vector<double>& weights, ExpertSplit experts = ExpertSplit::kRows) {
  SCOPED_TRACE(name + " over " + std::to_string(weights.size()) + " members, experts by " +
               std::string(expert_split_name(experts)));
  testing::Golden g;
  ASSERT_TRUE(testing::load_golden(name, g));
  auto m = Model::open(g.model_path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto shards = split_shards(**m, weights, experts);
  ASSERT_TRUE(shards.ok()) << shards.error().message;
  std::vector<Batch> batches(4);
  const int32_t n = static_cast<int32_t>(g.prompt_tokens.size());
  for (int32_t i = 0; i < n; ++i) batches[0].add(g.prompt_tokens[i], i, 0, true);
  for (int32_t step = 1; step < 4; ++step) batches[step].add(g.prompt_tokens[step], n + step - 1, 0, true);
  std::vector<std::vector<float>> embeddings(batches.size());
  {
    StageConfig whole = member_config(**m, Shard{});
    auto r = StageRunner::create(*m, whole);
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (size_t step = 0; step < batches.size(); ++step) (*r)->embed(batches[step], embeddings[step]);
  }
  const auto dir = std::filesystem::temp_directory_path() / ("strata-slice-bytes-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::shared_ptr<const Model>> file(weights.size(), *m), sparse;
  std::vector<StageConfig> configs;
  for (const Shard& s : *shards) {
    configs.push_back(member_config(**m, s));
    sparse.push_back(sparse_copy(g.model_path, **m, configs.back(), dir / ("member" + std::to_string(s.index))));
  }
  std::filesystem::remove_all(dir);
  EXPECT_EQ(member_logits(sparse, configs, batches, embeddings), member_logits(file, configs, batches, embeddings));

  // Between them the members read every byte of a cut tensor exactly once.
  for (const Model::Tensor& t : (*m)->tensors()) {
    std::vector<uint8_t> reads(t.info->nbytes, 0);
    bool cut = true;
    for (const StageConfig& c : configs) {
      const SliceBytes slice = shard_slice_bytes((*m)->hparams(), t.decl, *t.info, c.shard, c.input);
      if (slice.whole) cut = false;
      for_each_piece(slice, 0, slice.bytes(t.info->nbytes), [&](uint64_t at, uint64_t, uint64_t n) {
        for (uint64_t i = at; i < at + n; ++i) ++reads[i];
      });
    }
    if (!cut) continue;
    EXPECT_EQ(std::count(reads.begin(), reads.end(), 1), static_cast<int64_t>(reads.size())) << t.decl.name;
  }
}

TEST(ShardBytes, members_built_from_only_their_bytes_compute_the_same_bits) {
  for (const char* name : {"llama-dense-q8_0", "llama-dense-q4_k_m", "stories260K", "qwen35-dense-f32", "qwen35moe-q4_k_m",
                           "qwen3moe-q4_k_m"}) {
    check_model(name, {1, 1});
    check_model(name, {2, 1, 1});
  }
}

TEST(ShardBytes, whole_expert_members_built_from_only_their_bytes_compute_the_same_bits) {
  for (const char* name : {"qwen35moe-q4_k_m", "qwen3moe-q4_k_m"}) {
    check_model(name, {1, 1}, ExpertSplit::kWhole);
    check_model(name, {2, 1, 1}, ExpertSplit::kWhole);
  }
}

TEST(ShardBytes, strided_runs_walk_in_stream_order) {
  SliceBytes s{false, {{100, 10, 0, 1}, {1000, 4, 16, 3}}};
  ASSERT_TRUE(check_slice_bytes(s, 2000).ok());
  EXPECT_EQ(s.bytes(2000), 22u);
  std::vector<std::array<uint64_t, 3>> pieces;
  for_each_piece(s, 8, 10, [&](uint64_t at, uint64_t from, uint64_t n) { pieces.push_back({at, from, n}); });
  // Stream bytes 8..17: the first run's last 2, then pieces 0 and 1 of the strided run, 2 of piece 2.
  const std::vector<std::array<uint64_t, 3>> want{{108, 8, 2}, {1000, 10, 4}, {1016, 14, 4}};
  EXPECT_EQ(pieces, want);
  EXPECT_EQ(SliceBytes{}.bytes(77), 77u);

  EXPECT_FALSE(check_slice_bytes(s, 1035).ok());                               // last piece ends at 1036
  EXPECT_FALSE(check_slice_bytes({false, {{0, 8, 4, 2}}}, 100).ok());          // pieces overlap
  EXPECT_FALSE(check_slice_bytes({false, {{0, 0, 0, 1}}}, 100).ok());          // empty piece
  EXPECT_FALSE(check_slice_bytes({false, {{~0ull - 4, 8, 0, 1}}}, ~0ull).ok());  // offset + length wraps
  EXPECT_FALSE(check_slice_bytes({false, {{0, 1, ~0ull / 2, 3}}}, ~0ull).ok());  // stride x count wraps
  EXPECT_FALSE(check_slice_bytes({false, std::vector<ByteRun>(kMaxByteRuns + 1, {0, 1, 0, 1})}, 100000).ok());
  EXPECT_FALSE(check_slice_bytes({false, std::vector<ByteRun>(3, {0, 40, 0, 1})}, 100).ok());  // 120 bytes of 100
}

}  // namespace
}  // namespace strata::model
