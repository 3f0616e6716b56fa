// A stage spec as the worker reads it: the planner's KV cache types reach the worker's StageConfig and
// its admission bytes; an unknown type, or one whose blocks do not fit the model's heads, is refused
// naming the field; a shape outside the stage bounds is refused before anything is sized from it.
#include <gtest/gtest.h>

#include "memory/kv_cache.h"
#include "net/model_identity.h"
#include "net/stage_spec.h"
#include "testing/shared_data.h"

namespace strata::net {
namespace {

struct Spec {
  std::shared_ptr<const model::Model> model;
  plan::Plan plan;
  v1::StageSpec spec;
};

// The whole model on one worker, with these cache types.
Spec whole_model(const std::string& file, DType type_k, DType type_v) {
  Spec s;
  const std::string path = strata::testing::shared_file(file);
  auto model = model::Model::open(path);
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return s;
  s.model = *model;
  std::vector<plan::Node> nodes = {plan::local_node(1), plan::worker_node("127.0.0.1:1", uint64_t{1} << 34, 1)};
  plan::Request req;
  req.n_ctx = 256;
  req.n_batch = 16;
  req.tensor_split = {1};
  req.type_k = type_k;
  req.type_v = type_v;
  auto p = plan::make_plan(*s.model, nodes, req);
  EXPECT_TRUE(p.ok()) << p.error().message;
  auto metadata = metadata_image(s.model->file());
  EXPECT_TRUE(metadata.ok());
  if (!p.ok() || !metadata.ok()) return s;
  s.plan = *p;
  s.spec = make_stage_spec(*s.model, s.plan, 1, "kv-types", std::string(64, 'a'), *metadata);
  return s;
}

TEST(StageSpecCacheTypes, planned_types_reach_the_worker_config_and_its_admission_bytes) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-f32.gguf");
  const Spec f16 = whole_model("models/synth/llama-dense-f32.gguf", DType::F16, DType::F16);
  const Spec q = whole_model("models/synth/llama-dense-f32.gguf", DType::Q8_0, DType::Q4_0);
  ASSERT_TRUE(f16.model && q.model);
  EXPECT_EQ(q.spec.cache_type_k(), "q8_0");
  EXPECT_EQ(q.spec.cache_type_v(), "q4_0");
  auto a = parse_stage(f16.spec, 1);
  auto b = parse_stage(q.spec, 1);
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.error().message : a.error().message);
  EXPECT_EQ(b->config.type_k, DType::Q8_0);
  EXPECT_EQ(b->config.type_v, DType::Q4_0);
  // 4 layers x 256 cells x 128 elements (4 KV heads of 32) for K and V: f16 2 bytes each, q8_0 34 and
  // q4_0 18 bytes per 32 elements.
  EXPECT_EQ(a->bytes.kv, 4u * 256 * (256 + 256));
  EXPECT_EQ(b->bytes.kv, 4u * 256 * (4 * 34 + 4 * 18));
  EXPECT_EQ(b->bytes.kv, q.plan.bytes[1].kv);  // the worker sizes what the planner sized
  EXPECT_EQ(b->bytes.total() + (a->bytes.kv - b->bytes.kv), a->bytes.total());
}

TEST(StageSpecCacheTypes, unknown_or_misfitting_types_are_refused_naming_the_field) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-f32.gguf");
  Spec s = whole_model("models/synth/llama-dense-f32.gguf", DType::F16, DType::F16);
  ASSERT_TRUE(s.model);
  for (const char* bad : {"q4_1", "f32", "Q8_0", "q8_0\n", "bf16"}) {
    v1::StageSpec spec = s.spec;
    spec.set_cache_type_v(bad);
    auto p = parse_stage(spec, 1);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.error().message.find("cache_type_v"), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("f16, q8_0, q4_0"), std::string::npos) << p.error().message;
  }
  v1::StageSpec old = s.spec;  // a coordinator that predates the fields sends none: f16
  old.clear_cache_type_k();
  old.clear_cache_type_v();
  auto p = parse_stage(old, 1);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->config.type_k, DType::F16);
  EXPECT_EQ(p->config.type_v, DType::F16);

  // stories260K's heads are 8 wide: no Q8_0 block fits, on the planner's side or the worker's.
  STRATA_SHARED_FILE(stories, "models/stories260K.gguf");
  Spec st = whole_model("models/stories260K.gguf", DType::F16, DType::F16);
  ASSERT_TRUE(st.model);
  v1::StageSpec spec = st.spec;
  spec.set_cache_type_k("q8_0");
  p = parse_stage(spec, 1);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("cache_type_k q8_0"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("head_dim 8"), std::string::npos) << p.error().message;
  plan::Request req;
  req.n_ctx = 64;
  req.type_k = DType::Q4_0;
  auto plan = plan::make_plan(*st.model, {plan::local_node(1)}, req);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(plan.error().message.find("-ctk q4_0"), std::string::npos) << plan.error().message;
  EXPECT_NE(plan.error().message.find("head_dim is 8"), std::string::npos) << plan.error().message;
}

TEST(StageSpecLimits, shapes_outside_the_stage_bounds_are_refused_naming_what) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-f32.gguf");
  const Spec s = whole_model("models/synth/llama-dense-f32.gguf", DType::F16, DType::F16);
  ASSERT_TRUE(s.model);
  using Set = void (v1::StageSpec::*)(int32_t);
  const struct {
    Set set;
    int32_t value;
    const char* names;
  } cases[] = {
      {&v1::StageSpec::set_n_seq, 0, "sequences"},
      {&v1::StageSpec::set_n_seq, model::kMaxStageSeqs + 1, "sequences"},
      {&v1::StageSpec::set_n_ctx_per_seq, 0, "context"},
      {&v1::StageSpec::set_n_ctx_per_seq, model::kMaxStageContext + 1, "context"},
      {&v1::StageSpec::set_n_batch, -3, "batch size"},
      {&v1::StageSpec::set_n_batch, model::kMaxStageBatch + 1, "batch size"},
      {&v1::StageSpec::set_threads, -1, "threads"},
      {&v1::StageSpec::set_threads, model::kMaxStageThreads + 1, "threads"},
      {&v1::StageSpec::set_n_checkpoints, -1, "checkpoints"},
      {&v1::StageSpec::set_n_checkpoints, model::kMaxStageCheckpoints + 1, "checkpoints"},
  };
  for (const auto& c : cases) {
    v1::StageSpec spec = s.spec;
    (spec.*c.set)(c.value);
    auto p = parse_stage(spec, 1);
    ASSERT_FALSE(p.ok()) << c.names << " " << c.value;
    EXPECT_NE(p.error().message.find(c.names), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("out of range"), std::string::npos) << p.error().message;
  }
  v1::StageSpec own_threads = s.spec;  // 0 threads: the worker's own count
  own_threads.set_threads(0);
  auto p = parse_stage(own_threads, 7);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->config.n_threads, 7);
}

}  // namespace
}  // namespace strata::net
