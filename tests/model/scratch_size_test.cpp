// The planner sizes a stage's working memory with scratch_bytes; this test runs the largest batch
// through whole-model stages of every architecture and compares the plan with the heap the runner
// really grows (every operator new in this binary is counted), so that the formula can neither miss
// a buffer (MoE, Gated DeltaNet, per-thread tiles) nor drift far above what the kernels allocate.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "model/stage_layout.h"
#include "model/stage_runner.h"
#include "testing/sanitizers.h"
#include "testing/shared_data.h"

// Sanitizers bring operator new of their own (and check that it pairs with theirs): count only
// without them.
#if STRATA_TEST_ASAN || STRATA_TEST_TSAN
#define STRATA_COUNT_ALLOCATIONS 0
#else
#define STRATA_COUNT_ALLOCATIONS 1
#endif

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};
}  // namespace

#if STRATA_COUNT_ALLOCATIONS
namespace {

void* counted(size_t n, size_t align) {
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  const int64_t now = g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) + static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void release(void* p) {
  if (!p) return;
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}

}  // namespace
#endif

#if STRATA_COUNT_ALLOCATIONS
void* operator new(size_t n) { return counted(n, 0); }
void* operator new[](size_t n) { return counted(n, 0); }
void* operator new(size_t n, std::align_val_t a) { return counted(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return counted(n, static_cast<size_t>(a)); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
#endif

namespace strata::model {
namespace {

// Heap growth of one full batch (two sequences) through the whole model, from embedding to logits.
int64_t measured_peak(const std::shared_ptr<const Model>& model, const StageConfig& config) {
  auto runner = StageRunner::create(model, config);
  EXPECT_TRUE(runner.ok()) << runner.error().message;
  if (!runner.ok()) return -1;
  Batch batch;
  for (int32_t i = 0; i < config.n_batch; ++i) {
    const int32_t seq = i % 2;
    batch.add((7 * i + 3) % model->hparams().n_vocab, i / 2, seq, true);
  }
  std::vector<float> hidden;
  const int64_t base = g_live.load();
  g_peak.store(base);
  (*runner)->embed(batch, hidden);
  EXPECT_TRUE((*runner)->run_layers(batch, 0, model->hparams().n_layer, hidden.data()).ok());
  const std::vector<float> logits = (*runner)->logits(batch, hidden.data());
  EXPECT_EQ(logits.size(), static_cast<size_t>(config.n_batch) * model->hparams().n_vocab);
  return g_peak.load() - base;
}

class ScratchSize : public ::testing::TestWithParam<const char*> {};

TEST_P(ScratchSize, planned_scratch_covers_the_runners_peak_and_stays_close_to_it) {
  if (!STRATA_COUNT_ALLOCATIONS) GTEST_SKIP() << "sanitizer build: its own operator new cannot be counted";
  STRATA_SHARED_FILE(path, std::string("models/") + GetParam());
  auto model = Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  for (int32_t n_batch : {8, 64}) {
    StageConfig config;
    config.owned.assign((*model)->hparams().n_layer, 1);
    config.input = config.output = true;
    config.tensors = tensors_needed(**model, config.owned, true, true);
    config.n_seq = 2;
    config.n_ctx_per_seq = 128;
    config.n_batch = n_batch;
    config.n_threads = 2;
    const int64_t planned = static_cast<int64_t>(scratch_bytes((*model)->hparams(), config));
    (void)measured_peak(*model, config);  // first use: one-time tables and statics are not scratch
    const int64_t peak = measured_peak(*model, config);
    ASSERT_GT(peak, 0);
    EXPECT_LE(peak, planned) << GetParam() << ", batch " << n_batch << ": the runner grew more than planned";
    EXPECT_GE(peak * 2, planned) << GetParam() << ", batch " << n_batch << ": planned " << planned
                                 << " bytes, more than twice the peak " << peak;
    std::printf("%s batch %d: planned %lld, peak %lld\n", GetParam(), n_batch, static_cast<long long>(planned),
                static_cast<long long>(peak));
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, ScratchSize,
                         ::testing::Values("stories260K.gguf", "synth/llama-dense-f32.gguf", "synth/qwen3-dense-f32.gguf",
                                           "synth/qwen3moe-f32.gguf", "synth/qwen3next-f32.gguf",
                                           "synth/qwen35-dense-f32.gguf", "synth/qwen35moe-f32.gguf",
                                           "synth/qwen35moe-q4_k_m.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace strata::model
