// Every registered architecture through synth and back: the loaded hyperparameters show its traits,
// and optional tensors are declared where the traits say.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/names.h"
#include "model/architecture.h"
#include "model/model.h"
#include "testing/synth_models.h"

namespace strata::model {
namespace {

namespace names = gguf::names;
namespace tn = gguf::names::tensor;

// Every registered architecture, qwen2 included (no shared model has it), through synth and back:
// the loaded hyperparameters show the traits, and optional biases are declared where the traits say.
TEST(ArchitectureRegistry, every_architecture_loads_a_synthetic_model_with_its_traits) {
  for (const Architecture* a : architectures()) {
    const ArchTraits& t = a->traits();
    SCOPED_TRACE(std::string(t.arch));
    const std::string arch(t.arch);
    const std::string path = strata::testing::write_synth(strata::testing::tiny_spec(arch), arch + "-registry.gguf");
    auto m = Model::open(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const HParams& hp = (*m)->hparams();
    EXPECT_EQ(&(*m)->architecture(), a);
    EXPECT_EQ(hp.rope_type, t.rope);
    EXPECT_EQ(hp.has_recurrent_layers(), t.hybrid);
    EXPECT_EQ(hp.n_expert > 0, t.moe);
    EXPECT_EQ(hp.n_ff_shared_expert > 0, t.shared_expert);
    bool q_bias = false, q_norm = false;
    for (const TensorDecl& d : a->declare(hp)) {
      q_bias |= d.name == names::layer_tensor(0, tn::kAttnQ, tn::kBias);
      q_norm |= d.name == names::layer_tensor(hp.n_layer - 1, tn::kAttnQNorm);  // the last layer has attention
    }
    EXPECT_EQ(q_bias, t.attention_biases);
    EXPECT_EQ(q_norm, t.qk_norm);
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace strata::model
