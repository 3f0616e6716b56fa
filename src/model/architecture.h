// What an architecture is: its traits (the facts hparams loading, synth and the planner ask instead of
// comparing names), the tensors it declares (so the planner can place them without loading a byte) and
// the forward pass of one layer. Each src/model/<arch>.cpp defines one, with a comment on what the model
// is and why it makes its choices; architecture.cpp lists them all in one registry.
#pragma once

#include <climits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "model/batch.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace strata::memory {
class KvCache;
class RecurrentState;
}

namespace strata::model {

struct Scratch;
class Collective;
class WeightWarmer;

// Where a declared tensor goes once loaded.
using TensorSlot = std::variant<MatrixView LayerWeights::*, VectorView LayerWeights::*, MatrixView GlobalWeights::*,
                                VectorView GlobalWeights::*>;

inline constexpr int kInputLayer = -1;  // token embeddings
// Output tensors (output_norm, output) carry layer index n_layer.

struct TensorDecl {
  std::string name;             // as in the GGUF file
  int layer;                    // kInputLayer, 0..n_layer-1, or n_layer for the output head
  std::vector<int64_t> shape;   // expected ne[], innermost first
  bool required;
  TensorSlot slot;
  // A required tensor may be replaced by another form: it is then optional when every tensor named
  // here is present (e.g. ffn_gate_exps + ffn_up_exps instead of the fused ffn_gate_up_exps).
  std::vector<std::string> unless_present = {};
  // Routed-expert tensors: how many experts the last dimension holds (0 for every other tensor).
  int32_t n_experts = 0;
  // A multi-token-prediction block's tensor (layer >= hp.n_layer): read only by a stage that drafts.
  bool mtp = false;
};

// Everything one layer's forward pass may touch.
struct LayerContext {
  const HParams& hp;
  const GlobalWeights& global;
  tensor::ThreadPool& pool;
  const Batch& batch;
  memory::KvCache& kv;                  // attention layers
  memory::RecurrentState* recurrent;    // Gated DeltaNet layers; null when the model has none
  Scratch& scratch;
  Collective* collective = nullptr;     // tensor split: adds the group's partial sub-layer outputs
  WeightWarmer* warmer = nullptr;       // with a collective: records the matrices read, warms them while waiting
  // Routed experts held whole, [first_expert, end_expert); every expert unless cut by experts, and
  // the expert tensors then hold only these (expert first_expert at index 0).
  int32_t first_expert = 0;
  int32_t end_expert = INT32_MAX;
};

// What an architecture's layers are made of, as data. The shared layers (dense_transformer.h,
// hybrid_transformer.h) build their declarations and forward pass from these flags.
struct ArchTraits {
  std::string_view arch;           // general.architecture
  RopeType rope = RopeType::Norm;  // how q and k are rotated; the files do not say, the family does
  bool attention_biases = false;   // optional q/k/v/o biases are declared (bound when present)
  bool qk_norm = false;            // per-head RMSNorm of q and k before RoPE
  bool moe = false;                // routed experts: expert_count and expert_used_count are required
  bool shared_expert = false;      // a sigmoid-gated shared expert beside the routed ones
  bool hybrid = false;             // recurrent Gated DeltaNet layers between full-attention ones: ssm.* keys
                                   // are required, and the attention layers are gated
  bool nextn_blocks = false;       // files may end with multi-token-prediction blocks (declared, run only to draft)
  bool fused_beta_alpha = false;   // Gated DeltaNet: beta and alpha in one projection (ssm_ba), and q/k/v/z
                                   // optionally in one (ssm_in)
  bool grouped_value_heads = false;  // Gated DeltaNet: v-head h reads k-head h / (H_v / H_k), else h mod H_k
};

class Architecture {
 public:
  explicit Architecture(const ArchTraits& traits) : traits_(traits) {}
  virtual ~Architecture() = default;
  const ArchTraits& traits() const { return traits_; }
  std::string_view name() const { return traits_.arch; }
  virtual std::vector<TensorDecl> declare(const HParams& hp) const = 0;
  // x: batch.size() rows of n_embd floats, updated in place (the residual stream).
  virtual void forward_layer(const LayerContext& ctx, const LayerWeights& w, int il, float* x) const = 0;
  // Whether layer il keeps an attention KV cache (hybrid models have recurrent layers without one).
  virtual bool layer_has_kv(const HParams& /*hp*/, int /*il*/) const { return true; }

 private:
  ArchTraits traits_;
};

// Every architecture this build runs, in registry order.
std::span<const Architecture* const> architectures();

// The architecture for general.architecture, or null.
const Architecture* find_architecture(std::string_view arch);
// The same, or an error that names the architectures this build runs.
Result<const Architecture*> require_architecture(std::string_view arch);
// The traits alone (for code that only asks about the layers' makeup), or null.
const ArchTraits* find_arch_traits(std::string_view arch);

}  // namespace strata::model
