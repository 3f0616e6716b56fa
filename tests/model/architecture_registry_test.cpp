// The architecture registry: every entry is found by its name, an unknown name is a clear error, and
// each architecture's traits agree with what the shared GGUF models of that architecture carry.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "gguf/gguf.h"
#include "gguf/names.h"
#include "model/architecture.h"
#include "model/dense_transformer.h"
#include "model/hybrid_transformer.h"
#include "model/model.h"
#include "testing/shared_data.h"

namespace strata::model {
namespace {

namespace names = gguf::names;
namespace tn = gguf::names::tensor;

TEST(ArchitectureRegistry, every_architecture_is_found_by_its_name) {
  std::set<std::string_view> seen;
  ASSERT_FALSE(architectures().empty());
  for (const Architecture* a : architectures()) {
    EXPECT_TRUE(seen.insert(a->name()).second) << "registered twice: " << a->name();
    EXPECT_EQ(find_architecture(a->name()), a);
    EXPECT_EQ(find_arch_traits(a->name()), &a->traits());
    auto required = require_architecture(a->name());
    ASSERT_TRUE(required.ok()) << required.error().message;
    EXPECT_EQ(*required, a);
    EXPECT_EQ(a->traits().arch, a->name());
  }
  for (std::string_view name : {"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe", "qwen3next"}) {
    EXPECT_TRUE(seen.contains(name)) << name;
  }
}

TEST(ArchitectureRegistry, traits_are_consistent) {
  for (const Architecture* a : architectures()) {
    const ArchTraits& t = a->traits();
    SCOPED_TRACE(std::string(t.arch));
    // hparams reads the ssm.* keys exactly for the architectures whose layers use them.
    EXPECT_EQ(dynamic_cast<const HybridTransformer*>(a) != nullptr, t.hybrid);
    EXPECT_EQ(dynamic_cast<const DenseTransformer*>(a) != nullptr, !t.hybrid);
    EXPECT_TRUE(t.moe || !t.shared_expert);
    // The Gated DeltaNet options and the gated attention (QK-norm, no biases) exist only in the hybrid layer.
    EXPECT_TRUE(t.hybrid || !(t.fused_beta_alpha || t.grouped_value_heads || t.nextn_blocks));
    EXPECT_TRUE(!t.hybrid || (t.qk_norm && !t.attention_biases));
  }
}

TEST(ArchitectureRegistry, an_unknown_architecture_is_a_clear_error) {
  EXPECT_EQ(find_architecture("mamba"), nullptr);
  EXPECT_EQ(find_architecture(""), nullptr);
  EXPECT_EQ(find_architecture("Llama"), nullptr);  // names are exact
  EXPECT_EQ(find_arch_traits("mamba"), nullptr);
  auto r = require_architecture("mamba");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "architecture 'mamba' is not supported (supported: llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe, "
            "qwen3next)");
}

TEST(ArchitectureRegistry, loading_hparams_of_an_unknown_architecture_names_it_and_the_known_ones) {
  gguf::Writer w;
  w.set_string(std::string(names::kArchitecture), "mamba");
  w.set_u32(names::arch_key("mamba", names::hparam::kBlockCount), 2);
  auto bytes = w.write_to_memory();
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto file = gguf::File::from_bytes(*bytes, "mamba.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto hp = load_hparams(**file, nullptr);
  ASSERT_FALSE(hp.ok());
  EXPECT_EQ(hp.error().message.rfind("mamba.gguf: architecture 'mamba' is not supported (supported: llama, ", 0), 0u)
      << hp.error().message;
}

// The traits of a file's architecture must declare what the file holds: every tensor of the file is
// declared (so none is silently ignored), every required one is present, and the keys the traits
// make required are there.
void expect_traits_match(const std::filesystem::path& path) {
  SCOPED_TRACE(path.filename().string());
  auto opened = gguf::File::open(path.string());
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  const gguf::File& f = **opened;
  auto arch_name = f.get_string(names::kArchitecture);
  ASSERT_TRUE(arch_name.ok()) << arch_name.error().message;
  const Architecture* arch = find_architecture(*arch_name);
  ASSERT_NE(arch, nullptr) << *arch_name;
  const ArchTraits& t = arch->traits();
  auto has_key = [&](std::string_view key) { return f.has(names::arch_key(t.arch, key)); };
  EXPECT_EQ(t.moe, has_key(names::hparam::kExpertCount));
  EXPECT_EQ(t.hybrid, has_key(names::hparam::kSsmConvKernel));
  EXPECT_EQ(t.rope == RopeType::IMrope, has_key(names::hparam::kRopeDimensionSections));
  EXPECT_EQ(t.shared_expert, f.find_tensor(names::layer_tensor(0, tn::kFfnGateInpShexp)) != nullptr);
  EXPECT_EQ(t.fused_beta_alpha, f.find_tensor(names::layer_tensor(0, tn::kSsmBa)) != nullptr);

  auto hp = load_hparams(f, f.find_tensor(tn::kTokenEmbd));
  ASSERT_TRUE(hp.ok()) << hp.error().message;
  EXPECT_EQ(hp->rope_type, t.rope);
  EXPECT_EQ(hp->has_recurrent_layers(), t.hybrid);
  bool any_qk_norm = false;
  for (int il = 0; il < hp->n_layer; ++il) any_qk_norm |= f.find_tensor(names::layer_tensor(il, tn::kAttnQNorm)) != nullptr;
  EXPECT_EQ(any_qk_norm, t.qk_norm);

  std::set<std::string> declared;
  for (const TensorDecl& d : arch->declare(*hp)) {
    declared.insert(d.name);
    bool replaced = !d.unless_present.empty();
    for (const std::string& other : d.unless_present) replaced &= f.find_tensor(other) != nullptr;
    EXPECT_TRUE(!d.required || replaced || f.find_tensor(d.name) != nullptr) << "missing " << d.name;
  }
  for (const gguf::TensorInfo& info : f.tensors()) {
    const auto layer = names::parse_layer_tensor(info.name);
    if (layer && layer->layer >= hp->n_layer) continue;  // multi-token-prediction blocks are never run
    EXPECT_TRUE(declared.contains(info.name)) << "not declared: " << info.name;
  }
}

TEST(ArchitectureRegistry, traits_match_the_shared_models) {
  const std::filesystem::path models = ::strata::testing::shared_dir() / "models";
  ASSERT_TRUE(std::filesystem::is_directory(models / "synth")) << models;
  std::set<std::string> archs_seen;
  int n_files = 0;
  for (const auto& dir : {models, models / "synth"}) {  // legacy/ holds a GGUF v1 file, which is refused
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".gguf") continue;
      expect_traits_match(entry.path());
      auto f = gguf::File::open(entry.path().string());
      if (f.ok()) {
        if (auto a = (*f)->get_string(names::kArchitecture); a.ok()) archs_seen.insert(std::string(*a));
      }
      ++n_files;
    }
  }
  EXPECT_GE(n_files, 20);
  // Every architecture with a shared model was checked (qwen2 has none yet).
  for (std::string_view name : {"llama", "qwen3", "qwen3moe", "qwen35", "qwen35moe", "qwen3next"}) {
    EXPECT_TRUE(archs_seen.contains(std::string(name))) << name;
  }
}

}  // namespace
}  // namespace strata::model
