// Bytes per node (weights, KV cache, recurrent state, scratch) and the check against each node's limit,
// with a fix when something does not fit.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/checked.h"
#include "plan/internal.h"

namespace strata::plan::detail {
namespace {

bool fits(const std::vector<Node>& nodes, const std::vector<NodeBytes>& bytes) {
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (bytes[n].total() > nodes[n].memory_usable) return false;
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
      return node_bytes(model, nodes, request, trial)[n].total() <= nodes[n].memory_usable;
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
  for (const Node& n : nodes) ratios.push_back(static_cast<float>(std::min(n.memory_usable, need)));
  std::vector<int32_t> owner = split_layers(n_layer, all, ratios, int64_t{n_layer} + 1);
  owner[n_layer] = owner[n_layer - 1];
  if (fits(nodes, node_bytes(model, nodes, request, owner))) return owner;
  return greedy_fit(model, nodes, request);
}

}  // namespace

model::StageConfig make_stage(const model::Model& model, const Node& node, const Request& request, StageRole role) {
  model::StageConfig s;
  s.tensors = model::tensors_needed(model, role.owned, role.input, role.output, role.mtp);
  s.owned = std::move(role.owned);
  s.input = role.input;
  s.output = role.output;
  s.mtp = role.mtp;
  s.shard = role.shard;
  s.n_seq = std::max(1, request.n_seq);
  s.n_ctx_per_seq = std::max(0, request.n_ctx) / s.n_seq;
  s.n_batch = std::max(1, request.n_batch);
  s.n_threads = std::max(1, node.threads);
  s.n_checkpoints = std::max(0, request.n_checkpoints);
  s.cache_ram_bytes = request.cache_ram_bytes;
  s.type_k = request.type_k;  // every node caches in the requested types
  s.type_v = request.type_v;
  s.repack = node.repacks();  // its own kernels', from its features
  return s;
}

std::vector<model::StageConfig> node_stages(const model::Model& model, const std::vector<Node>& nodes,
                                           const Request& request, const std::vector<int32_t>& owner) {
  const int32_t n_layer = model.hparams().n_layer;
  std::vector<model::StageConfig> stages;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    StageRole role;
    role.owned.assign(static_cast<size_t>(n_layer), 0);
    for (int32_t il = 0; il < n_layer; ++il) role.owned[il] = owner[il] == node ? 1 : 0;
    role.input = node == 0;  // the coordinator embeds the tokens
    role.output = owner[n_layer] == node;
    role.mtp = request.mtp && role.output;
    stages.push_back(make_stage(model, nodes[n], request, std::move(role)));
  }
  return stages;
}

std::vector<NodeBytes> node_bytes(const model::Model& model, const std::vector<model::StageConfig>& stages) {
  std::vector<NodeBytes> bytes;
  for (const model::StageConfig& s : stages) bytes.push_back(model::stage_bytes(model, s));
  return bytes;
}

std::vector<NodeBytes> node_bytes(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                                  const std::vector<int32_t>& owner) {
  return node_bytes(model, node_stages(model, nodes, request, owner));
}

Status check_budget(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                    const std::vector<int32_t>& owner, const std::vector<NodeBytes>& bytes) {
  std::string over;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const NodeBytes& b = bytes[n];
    if (b.total() <= nodes[n].memory_usable) continue;
    const std::string ckpt = b.checkpoints ? ", state checkpoints " + human_bytes(b.checkpoints) : "";
    over += fmt::format("{}{} needs {} (weights {}, KV {}, state {}{}, scratch {}) but its limit is {}",
                        over.empty() ? "" : "; ", node_label(nodes, static_cast<int32_t>(n)), human_bytes(b.total()),
                        human_bytes(b.weights), human_bytes(b.kv), human_bytes(b.state), ckpt, human_bytes(b.scratch),
                        limit_text(nodes[n].memory_usable));
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
      have = sat_add(have, nodes[n].memory_usable);
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
