// The plan counts repacked matrices at the size a node holds them: Q4_K and Q5_K grow by their
// unpacked scales (148 / 144 and 180 / 176 bytes per super-block), the other types keep their size,
// and the plan says what repacking adds.
#include <gtest/gtest.h>

#include "model/model.h"
#include "plan/plan.h"
#include "plan_test_util.h"
#include "tensor/repack.h"
#include "testing/shared_data.h"

namespace strata::plan {
namespace {

TEST(RepackBytes, planned_weights_are_the_held_sizes_and_the_plan_says_what_repacking_adds) {
  STRATA_SHARED_FILE(path, "models/synth/qwen35moe-q4_k_m.gguf");
  auto model = model::Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  if (!tensor::repacks(DType::Q4_K, 16, 256)) GTEST_SKIP() << "this CPU does not repack (needs AVX-512 VNNI)";
  uint64_t file = 0, held = 0;
  for (const auto& t : (*model)->tensors()) {
    const auto& i = *t.info;
    file += i.nbytes;
    const bool grouped = i.n_dims >= 2 && i.n_rows() % 16 == 0;
    if (grouped && i.type == DType::Q4_K) held += i.nbytes / 144 * 148;
    else if (grouped && i.type == DType::Q5_K) held += i.nbytes / 176 * 180;
    else held += i.nbytes;
  }
  ASSERT_GT(held, file);
  auto p = make_plan(**model, {local_node(2)}, testing::request());
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->bytes[0].weights, held);
  EXPECT_EQ(p->bytes[0].repacked, held - file);
  EXPECT_NE(render(*p).find("repack"), std::string::npos) << render(*p);
}

}  // namespace
}  // namespace strata::plan
