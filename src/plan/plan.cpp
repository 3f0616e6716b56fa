#include "plan/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/system.h"
#include "memory/kv_cache.h"

namespace strata::plan {
namespace {

std::string human_bytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / double(1 << 30));
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / double(1 << 20));
  return fmt::format("{:.1f} KiB", b / 1024.0);
}

}  // namespace

std::vector<uint8_t> Plan::owned_by(int32_t node) const {
  std::vector<uint8_t> owned(layer_owner.size());
  for (size_t i = 0; i < layer_owner.size(); ++i) owned[i] = layer_owner[i] == node;
  return owned;
}

Node local_node(int32_t threads) {
  Node n;
  n.name = "local";
  n.threads = threads;
  n.memory_limit = read_memory_facts().available;
  return n;
}

Result<Plan> make_plan(const model::Model& model, const std::vector<Node>& nodes, const Request& request) {
  const model::HParams& hp = model.hparams();
  if (nodes.empty()) return make_error("plan: no nodes");
  if (nodes.size() > 1) return make_error("plan: several nodes are not supported yet");
  Plan p;
  p.nodes = nodes;
  p.layer_owner.assign(hp.n_layer, 0);
  p.stages.push_back({0, 0, hp.n_layer});
  p.bytes.assign(nodes.size(), {});
  for (const auto& t : model.tensors()) {
    const int32_t owner = t.decl.layer < 0 ? p.input_node
                          : t.decl.layer >= hp.n_layer ? p.output_node
                                                       : p.layer_owner[t.decl.layer];
    p.bytes[owner].weights += t.info->nbytes;
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    memory::KvConfig kv;
    kv.n_layer = hp.n_layer;
    kv.layer_has_kv = p.owned_by(static_cast<int32_t>(n));
    kv.n_embd_k = hp.n_embd_k_gqa();
    kv.n_embd_v = hp.n_embd_v_gqa();
    kv.n_seq = request.n_seq;
    kv.n_ctx_per_seq = request.n_ctx / std::max(1, request.n_seq);
    p.bytes[n].kv = memory::KvCache::bytes_needed(kv);
    // Activations of the largest batch: a few rows of the widest projection per token, plus logits.
    const uint64_t widest = std::max<uint64_t>({uint64_t(hp.n_embd), uint64_t(hp.n_ff), uint64_t(hp.n_head) * hp.head_dim_k});
    p.bytes[n].scratch = uint64_t(request.n_batch) * (8 * widest + hp.n_vocab) * sizeof(float);
    if (p.bytes[n].total() > nodes[n].memory_limit) {
      return make_error("plan: node '{}' needs {} (weights {}, KV {}, scratch {}) but has {} usable", nodes[n].name,
                        human_bytes(p.bytes[n].total()), human_bytes(p.bytes[n].weights), human_bytes(p.bytes[n].kv),
                        human_bytes(p.bytes[n].scratch), human_bytes(nodes[n].memory_limit));
    }
  }
  p.decisions.push_back(fmt::format("all {} layers on node '{}' (single node)", hp.n_layer, nodes[0].name));
  return p;
}

std::string render(const Plan& p) {
  std::ostringstream out;
  out << fmt::format("{:<22} {:>9} {:>12} {:>11} {:>11} {:>11} {:>24}\n", "node", "layers", "weights", "KV", "state",
                     "scratch", "total / limit");
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    std::string layers;
    for (const Stage& s : p.stages) {
      if (s.node != static_cast<int32_t>(n)) continue;
      if (!layers.empty()) layers += ",";
      layers += fmt::format("{}-{}", s.first_layer, s.end_layer - 1);
    }
    const NodeBytes& b = p.bytes[n];
    const std::string limit = p.nodes[n].memory_limit == std::numeric_limits<uint64_t>::max()
                                  ? "unlimited" : human_bytes(p.nodes[n].memory_limit);
    out << fmt::format("{:<22} {:>9} {:>12} {:>11} {:>11} {:>11} {:>24}\n", p.nodes[n].name,
                       layers.empty() ? "-" : layers, human_bytes(b.weights), human_bytes(b.kv), human_bytes(b.state),
                       human_bytes(b.scratch), human_bytes(b.total()) + " / " + limit);
  }
  for (const std::string& note : p.decisions) out << "note: " << note << "\n";
  return out.str();
}

}  // namespace strata::plan
