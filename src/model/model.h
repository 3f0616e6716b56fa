// A model file opened and understood: hyperparameters, architecture, declared tensors. Binding the
// weights of the layers a node owns is a separate step, driven by the plan.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/architecture.h"

namespace strata::model {

class Model {
 public:
  static Result<std::shared_ptr<const Model>> open(const std::string& path);

  const gguf::File& file() const { return *file_; }
  std::shared_ptr<const gguf::File> file_ptr() const { return file_; }
  const HParams& hparams() const { return hp_; }
  const Architecture& architecture() const { return *arch_; }
  // Declared tensors present in the file, with their file info.
  struct Tensor {
    TensorDecl decl;
    const gguf::TensorInfo* info;
  };
  const std::vector<Tensor>& tensors() const { return tensors_; }
  uint64_t n_params() const;

  // Views of the weights: globals always (embeddings, head), layers where owned[il] is set.
  Result<Weights> bind(const std::vector<uint8_t>& owned) const;

 private:
  std::shared_ptr<const gguf::File> file_;
  HParams hp_;
  const Architecture* arch_ = nullptr;
  std::vector<Tensor> tensors_;
};

}  // namespace strata::model
