// A model understood: hyperparameters, architecture, declared tensors with their shapes. The tensor
// bytes may be all present (a local GGUF file) or only those of the layers a node owns (a worker
// assembling a model from metadata and the tensors it holds). Binding weights is driven by the plan.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"
#include "model/architecture.h"

namespace strata::model {

class Model {
 public:
  // A complete local GGUF file.
  static Result<std::shared_ptr<const Model>> open(const std::string& path);
  // Metadata (a GGUF image without tensors) plus every tensor's info; `data` gives the bytes of the
  // tensors held here (null for the others), which must be read-only file mappings (see
  // release_pages). `keep_alive` holds whatever owns those bytes.
  static Result<std::shared_ptr<const Model>> assemble(std::shared_ptr<const gguf::File> metadata,
                                                       std::vector<gguf::TensorInfo> infos,
                                                       const std::function<const uint8_t*(const gguf::TensorInfo&)>& data,
                                                       std::vector<std::shared_ptr<const void>> keep_alive);

  // The file with the metadata (the whole model file when opened locally).
  const gguf::File& file() const { return *file_; }
  const HParams& hparams() const { return hp_; }
  const Architecture& architecture() const { return *arch_; }

  struct Tensor {
    TensorDecl decl;
    const gguf::TensorInfo* info;
    const uint8_t* data;  // null when this node does not hold the bytes
  };
  // Declared tensors present in the model, in declaration order.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<gguf::TensorInfo>& all_infos() const { return infos_; }
  uint64_t n_params() const;
  // Parameters one token's forward pass uses: n_params() minus the routed experts it does not run
  // (n_expert - n_expert_used of every expert tensor). Equals n_params() for dense models.
  uint64_t n_active_params() const;
  // False when the head is tied to token_embd.
  bool has_output_weight() const;
  // Whether the file's multi-token-prediction block can draft (--spec-type draft-mtp): the error says
  // why not (no block, or one missing a required tensor; the trunk runs either way).
  Status mtp_available() const;

  // Views of exactly the named tensors (the plan's list for this node; the tied head aliases
  // token_embd). Fails, naming the tensor, when one is not a model tensor or not held here.
  Result<Weights> bind(const std::vector<std::string>& names) const;

  // Drops the resident pages of a tensor's mapped bytes once a repacked copy replaces them, so the
  // weights are not held twice. Reading them later is still correct: the kernel reloads the pages
  // from the file (tensor bytes are always read-only file mappings).
  void release_pages(const Tensor& t) const;

 private:
  static Result<std::shared_ptr<const Model>> build(std::shared_ptr<Model> m);

  std::shared_ptr<const gguf::File> file_;
  std::vector<gguf::TensorInfo> infos_;
  std::unordered_map<std::string, const uint8_t*> data_;
  std::vector<std::shared_ptr<const void>> keep_alive_;
  HParams hp_;
  const Architecture* arch_ = nullptr;
  std::vector<Tensor> tensors_;
  std::string mtp_missing_;  // the first required MTP tensor the file lacks
};

}  // namespace strata::model
