// What an architecture is: the tensors it declares (so the planner can place them without loading a
// byte) and the forward pass of one layer. One file per architecture implements this.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "model/batch.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace strata::memory {
class KvCache;
class RecurrentState;
}

namespace strata::model {

struct Scratch;

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
};

class Architecture {
 public:
  virtual ~Architecture() = default;
  virtual std::string_view name() const = 0;
  virtual std::vector<TensorDecl> declare(const HParams& hp) const = 0;
  // x: batch.size() rows of n_embd floats, updated in place (the residual stream).
  virtual void forward_layer(const LayerContext& ctx, const LayerWeights& w, int il, float* x) const = 0;
  // Whether layer il keeps an attention KV cache (hybrid models have recurrent layers without one).
  virtual bool layer_has_kv(const HParams& /*hp*/, int /*il*/) const { return true; }
  // Bytes of recurrent state (conv + delta-rule matrices) layer il keeps for n_seq sequences.
  virtual uint64_t recurrent_state_bytes(const HParams& /*hp*/, int /*il*/, int32_t /*n_seq*/) const { return 0; }
};

// The architecture for general.architecture, or null.
const Architecture* find_architecture(std::string_view arch);

}  // namespace strata::model
