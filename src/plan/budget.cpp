// Bytes per node (weights, KV cache, recurrent state, scratch) and the check against each node's limit,
// with a fix when something does not fit.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/checked.h"
#include "memory/kv_cache.h"
#include "plan/internal.h"

namespace strata::plan::detail {
namespace {

bool has_tensor(const model::Model& model, std::string_view name) {
  return std::any_of(model.tensors().begin(), model.tensors().end(),
                     [&](const model::Model::Tensor& t) { return t.decl.name == name; });
}

bool fits(const std::vector<Node>& nodes, const std::vector<NodeBytes>& bytes) {
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (bytes[n].total() > nodes[n].memory_limit) return false;
  }
  return true;
}

std::string limit_text(uint64_t limit) { return limit == kUnlimited ? "unlimited" : human_bytes(limit); }

// Owners that fit, filling the nodes in order (this machine first), each with as many layers as fit.
std::optional<std::vector<int32_t>> greedy_fit(const model::Model& model, const std::vector<Node>& nodes,
                                               const Request& request) {
  const int32_t n_all = model.hparams().n_layer + 1;
  std::vector<int32_t> owner(static_cast<size_t>(n_all), -1);
  int32_t start = 0;
  for (int32_t n = 0; n < static_cast<int32_t>(nodes.size()) && start < n_all; ++n) {
    auto fits_with = [&](int32_t count) {
      std::vector<int32_t> trial(owner);
      for (int32_t il = start; il < start + count; ++il) trial[il] = n;
      return node_bytes(model, nodes, request, trial)[n].total() <= nodes[n].memory_limit;
    };
    if (!fits_with(0)) return std::nullopt;
    int32_t lo = 0, hi = n_all - start;  // lo fits; find the largest count that fits
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo + 1) / 2;
      if (fits_with(mid)) lo = mid;
      else hi = mid - 1;
    }
    for (int32_t il = start; il < start + lo; ++il) owner[il] = n;
    start += lo;
  }
  if (start < n_all) return std::nullopt;
  return owner;
}

// A placement that fits: the split by usable memory over all nodes, else the greedy fill.
std::optional<std::vector<int32_t>> fitting_owner(const model::Model& model, const std::vector<Node>& nodes,
                                                  const Request& request) {
  const int32_t n_layer = model.hparams().n_layer;
  std::vector<int32_t> all;
  for (size_t i = 0; i < nodes.size(); ++i) all.push_back(static_cast<int32_t>(i));
  // Cap unlimited nodes at what the whole model needs, so that they do not take everything.
  uint64_t need = 0;
  std::vector<int32_t> on_one(static_cast<size_t>(n_layer) + 1, 0);
  for (const NodeBytes& b : node_bytes(model, nodes, request, on_one)) need = sat_add(need, b.total());
  std::vector<float> ratios;
  for (const Node& n : nodes) ratios.push_back(static_cast<float>(std::min(n.memory_limit, need)));
  std::vector<int32_t> owner = split_layers(n_layer, all, ratios, int64_t{n_layer} + 1);
  owner[n_layer] = owner[n_layer - 1];
  if (fits(nodes, node_bytes(model, nodes, request, owner))) return owner;
  return greedy_fit(model, nodes, request);
}

}  // namespace

std::vector<std::vector<size_t>> extra_tensor_indices(const model::Model& model, size_t n_nodes,
                                                      const std::vector<int32_t>& owner) {
  std::vector<std::vector<size_t>> extra(n_nodes);
  const int32_t n_layer = model.hparams().n_layer;
  const bool tied = !has_tensor(model, "output.weight");
  std::vector<uint8_t> runs_layers(n_nodes, 0);
  for (int32_t il = 0; il < n_layer; ++il) {
    if (owner[il] >= 0 && owner[il] < static_cast<int32_t>(n_nodes)) runs_layers[owner[il]] = 1;
  }
  const int32_t out = owner[n_layer];
  const auto& tensors = model.tensors();
  for (size_t t = 0; t < tensors.size(); ++t) {
    const std::string& name = tensors[t].decl.name;
    if (name == "token_embd.weight" && tied && out > 0 && out < static_cast<int32_t>(n_nodes)) extra[out].push_back(t);
    if (name == "rope_freqs.weight") {
      for (size_t n = 1; n < n_nodes; ++n) {
        if (runs_layers[n]) extra[n].push_back(t);
      }
    }
  }
  return extra;
}

std::vector<NodeBytes> node_bytes(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                                  const std::vector<int32_t>& owner) {
  const model::HParams& hp = model.hparams();
  const int32_t n_layer = hp.n_layer;
  const int32_t n_nodes = static_cast<int32_t>(nodes.size());
  auto valid = [&](int32_t n) { return n >= 0 && n < n_nodes; };
  std::vector<NodeBytes> bytes(nodes.size());
  const auto& tensors = model.tensors();
  for (const model::Model::Tensor& t : tensors) {
    const int32_t home = t.decl.layer < 0 ? 0 : owner[std::min(t.decl.layer, n_layer)];
    if (valid(home)) bytes[home].weights += t.info->nbytes;
  }
  const auto extra = extra_tensor_indices(model, nodes.size(), owner);
  for (int32_t n = 0; n < n_nodes; ++n) {
    for (size_t t : extra[n]) bytes[n].weights += tensors[t].info->nbytes;
  }

  const int32_t n_seq = std::max(1, request.n_seq);
  const int32_t ctx_per_seq = std::max(0, request.n_ctx) / n_seq;
  const uint64_t E = static_cast<uint64_t>(hp.n_embd), V = static_cast<uint64_t>(hp.n_vocab);
  const uint64_t q = uint64_t(hp.n_head) * hp.head_dim_k, o = uint64_t(hp.n_head) * hp.head_dim_v;
  const uint64_t kw = static_cast<uint64_t>(hp.n_embd_k_gqa()), vw = static_cast<uint64_t>(hp.n_embd_v_gqa());
  const uint64_t ff = std::max<uint64_t>(uint64_t(hp.n_ff), uint64_t(hp.n_expert_used) * hp.n_ff_expert + hp.n_ff_shared_expert);
  const uint64_t B = static_cast<uint64_t>(std::max(1, request.n_batch));
  const int32_t out = owner[n_layer];
  for (int32_t n = 0; n < n_nodes; ++n) {
    memory::KvConfig kv;
    kv.n_layer = n_layer;
    kv.layer_has_kv.assign(static_cast<size_t>(n_layer), 0);
    bool runs = false;
    for (int32_t il = 0; il < n_layer; ++il) {
      if (owner[il] != n) continue;
      runs = true;
      kv.layer_has_kv[il] = model.architecture().layer_has_kv(hp, il) ? 1 : 0;
      bytes[n].state += model.architecture().recurrent_state_bytes(hp, il, n_seq);
    }
    kv.n_embd_k = hp.n_embd_k_gqa();
    kv.n_embd_v = hp.n_embd_v_gqa();
    kv.n_seq = n_seq;
    kv.n_ctx_per_seq = ctx_per_seq;
    bytes[n].kv = memory::KvCache::bytes_needed(kv);
    uint64_t floats = 0;
    if (runs) {
      const uint64_t threads = static_cast<uint64_t>(std::max(1, nodes[n].threads));
      floats += B * (4 * E + q + kw + vw + o + 3 * ff) + threads * static_cast<uint64_t>(ctx_per_seq);
    }
    if (n == out) floats += B * (E + V);
    if (n == 0) floats += B * E + (out != 0 ? B * V : 0);
    bytes[n].scratch = floats * sizeof(float);
  }
  return bytes;
}

Status check_budget(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                    const std::vector<int32_t>& owner, const std::vector<NodeBytes>& bytes) {
  std::string over;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const NodeBytes& b = bytes[n];
    if (b.total() <= nodes[n].memory_limit) continue;
    over += fmt::format("{}{} needs {} (weights {}, KV {}, state {}, scratch {}) but its limit is {}",
                        over.empty() ? "" : "; ", node_label(nodes, static_cast<int32_t>(n)), human_bytes(b.total()),
                        human_bytes(b.weights), human_bytes(b.kv), human_bytes(b.state), human_bytes(b.scratch),
                        limit_text(nodes[n].memory_limit));
  }
  if (over.empty()) return {};

  std::vector<std::string> fixes;
  if (nodes.size() > 1) {
    if (auto fit = fitting_owner(model, nodes, request)) {
      if (auto ts = agreeing_tensor_split(nodes, *fit, request)) {
        fixes.push_back(fmt::format("{} fits {}{}", ts->flag, ts->detail,
                                    request.overrides.empty() ? "" : " (with -ot pins that agree)"));
      }
    }
  }
  // The largest context that fits with this placement.
  const int32_t n_seq = std::max(1, request.n_seq);
  auto fits_ctx = [&](int32_t n_ctx) {
    Request r = request;
    r.n_ctx = n_ctx;
    return fits(nodes, node_bytes(model, nodes, r, owner));
  };
  if (request.n_ctx > n_seq && fits_ctx(n_seq)) {
    int32_t lo = n_seq, hi = request.n_ctx - 1;
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo + 1) / 2;
      if (fits_ctx(mid)) lo = mid;
      else hi = mid - 1;
    }
    if (lo >= 1024) lo -= lo % 256;
    fixes.push_back(fmt::format("-c {} fits with this placement", lo));
  }
  std::string fix;
  if (fixes.empty()) {
    uint64_t need = 0, have = 0;
    for (size_t n = 0; n < nodes.size(); ++n) {
      need = sat_add(need, bytes[n].total());
      have = sat_add(have, nodes[n].memory_limit);
    }
    fix = fmt::format("no split or smaller context fits: the plan needs {} in all against {} of usable memory; add nodes "
                      "(--rpc) or use a smaller model",
                      human_bytes(need), limit_text(have));
  } else {
    for (const std::string& f : fixes) fix += (fix.empty() ? "" : "; or ") + f;
  }
  return make_error("plan: does not fit in memory: {}. Fix: {}", over, fix);
}

}  // namespace strata::plan::detail
