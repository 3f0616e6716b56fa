#include "model/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/ranges.h>

#include <algorithm>

#include "gguf/names.h"

namespace strata::model {
namespace {

std::string shape_string(const int64_t* ne, size_t n) { return fmt::format("[{}]", fmt::join(ne, ne + n, ", ")); }

Status check_shape(const gguf::File& f, const TensorDecl& d, const gguf::TensorInfo& t) {
  bool same = t.n_dims <= 4 && d.shape.size() <= 4;
  for (size_t i = 0; same && i < 4; ++i) {
    const int64_t want = i < d.shape.size() ? d.shape[i] : 1;
    same = t.ne[i] == want;
  }
  if (!same) {
    return make_error("{}: tensor '{}' has shape {}, expected {}", f.path(), d.name, shape_string(t.ne, t.n_dims),
                      shape_string(d.shape.data(), d.shape.size()));
  }
  if (!info(t.type).supported) {
    return make_error("{}: tensor '{}' has type {}, which Strata does not support", f.path(), d.name,
                      dtype_name(t.type));
  }
  return {};
}

}  // namespace

Result<std::shared_ptr<const Model>> Model::open(const std::string& path) {
  STRATA_ASSIGN(auto file, gguf::File::open(path));
  auto m = std::shared_ptr<Model>(new Model());
  m->file_ = file;
  m->infos_ = file->tensors();
  for (const gguf::TensorInfo& t : m->infos_) m->data_[t.name] = file->tensor_data(t);
  return build(std::move(m));
}

Result<std::shared_ptr<const Model>> Model::assemble(std::shared_ptr<const gguf::File> metadata,
                                                     std::vector<gguf::TensorInfo> infos,
                                                     const std::function<const uint8_t*(const gguf::TensorInfo&)>& data,
                                                     std::vector<std::shared_ptr<const void>> keep_alive) {
  auto m = std::shared_ptr<Model>(new Model());
  m->file_ = std::move(metadata);
  m->infos_ = std::move(infos);
  m->keep_alive_ = std::move(keep_alive);
  for (const gguf::TensorInfo& t : m->infos_) m->data_[t.name] = data(t);
  return build(std::move(m));
}

void Model::release_pages(const Tensor& t) const {
  if (!t.data) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(t.data) + t.info->nbytes) / page * page;
  // Whole pages inside the tensor only: neighbours keep theirs. Failure only costs memory.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Result<std::shared_ptr<const Model>> Model::build(std::shared_ptr<Model> m) {
  const gguf::File& file = *m->file_;
  const gguf::TensorInfo* embd = nullptr;
  for (const gguf::TensorInfo& t : m->infos_) {
    if (t.name == gguf::names::tensor::kTokenEmbd) embd = &t;
  }
  STRATA_ASSIGN(m->hp_, load_hparams(file, embd));
  m->arch_ = find_architecture(m->hp_.arch);
  if (!m->arch_) return make_error("{}: architecture '{}' is not supported", file.path(), m->hp_.arch);
  std::unordered_map<std::string_view, const gguf::TensorInfo*> by_name;
  for (const gguf::TensorInfo& t : m->infos_) by_name[t.name] = &t;
  for (TensorDecl& d : m->arch_->declare(m->hp_)) {
    auto it = by_name.find(d.name);
    if (it == by_name.end() && d.mtp && d.required && m->mtp_missing_.empty()) m->mtp_missing_ = d.name;
    if (it == by_name.end()) {
      if (!d.required || d.mtp) continue;
      const bool replaced = !d.unless_present.empty() &&
                            std::all_of(d.unless_present.begin(), d.unless_present.end(),
                                        [&](const std::string& n) { return by_name.count(n) != 0; });
      if (replaced) continue;
      if (d.unless_present.empty()) return make_error("{}: missing tensor '{}'", file.path(), d.name);
      return make_error("{}: missing tensor '{}' (or its alternative {})", file.path(), d.name,
                        fmt::join(d.unless_present, " + "));
    }
    STRATA_TRY(check_shape(file, d, *it->second));
    const uint8_t* data = m->data_[d.name];
    m->tensors_.push_back({std::move(d), it->second, data});
  }
  // An incomplete MTP block cannot draft, and the trunk does not need it: it is left out.
  if (!m->mtp_missing_.empty()) std::erase_if(m->tensors_, [](const Tensor& t) { return t.decl.mtp; });
  return std::shared_ptr<const Model>(std::move(m));
}

Status Model::mtp_available() const {
  if (hp_.n_nextn == 0) return make_error("{}: the model has no multi-token-prediction block (nextn_predict_layers)", file_->path());
  if (!mtp_missing_.empty()) {
    return make_error("{}: the multi-token-prediction block is incomplete (no '{}'), so it cannot draft", file_->path(),
                      mtp_missing_);
  }
  return {};
}

bool Model::has_output_weight() const {
  for (const Tensor& t : tensors_) {
    if (t.decl.name == gguf::names::tensor::kOutput) return true;
  }
  return false;
}

uint64_t Model::n_params() const {
  uint64_t n = 0;
  for (const auto& t : tensors_) n += static_cast<uint64_t>(t.info->n_elements());
  return n;
}

uint64_t Model::n_active_params() const {
  const HParams& hp = hp_;
  uint64_t n = n_params();
  for (const auto& t : tensors_) {
    const int32_t x = t.decl.n_experts;
    if (x <= 0 || hp.n_expert_used >= x) continue;
    // Each token runs n_expert_used of the x experts a routed-expert tensor holds.
    const uint64_t per_expert = static_cast<uint64_t>(t.info->n_elements()) / static_cast<uint64_t>(x);
    n -= per_expert * static_cast<uint64_t>(x - hp.n_expert_used);
  }
  return n;
}

Result<Weights> Model::bind(const std::vector<std::string>& names) const {
  std::unordered_map<std::string_view, const Tensor*> by_name;
  for (const Tensor& t : tensors_) by_name[t.decl.name] = &t;
  Weights w;
  w.layers.resize(hp_.n_layer_all);
  for (const std::string& name : names) {
    const auto found = by_name.find(name);
    if (found == by_name.end()) return make_error("{}: '{}' is not a tensor of this model", file_->path(), name);
    const Tensor& t = *found->second;
    const TensorDecl& d = t.decl;
    const uint8_t* data = t.data;
    if (!data) return make_error("{}: tensor '{}' is needed here but not loaded on this node", file_->path(), d.name);
    const MatrixView matrix{t.info->type, t.info->ne[0], t.info->n_rows(), data, row_bytes(t.info->type, t.info->ne[0])};
    Status status;
    std::visit(
        [&](auto slot) {
          using Slot = decltype(slot);
          constexpr bool is_vector = std::is_same_v<Slot, VectorView LayerWeights::*> ||
                                     std::is_same_v<Slot, VectorView GlobalWeights::*>;
          constexpr bool in_layer = std::is_same_v<Slot, VectorView LayerWeights::*> ||
                                    std::is_same_v<Slot, MatrixView LayerWeights::*>;
          auto& target = [&]() -> auto& {
            if constexpr (in_layer) return w.layers[d.layer].*slot;
            else return w.global.*slot;
          }();
          if constexpr (is_vector) {
            if (t.info->type != DType::F32) {
              status = make_error("{}: tensor '{}' must be F32, not {}", file_->path(), d.name, dtype_name(t.info->type));
              return;
            }
            target = VectorView{reinterpret_cast<const float*>(data), t.info->n_elements()};
          } else {
            target = matrix;
          }
        },
        d.slot);
    STRATA_TRY(status);
  }
  if (!has_output_weight()) w.global.output = w.global.token_embd;  // tied embeddings
  return w;
}

}  // namespace strata::model
