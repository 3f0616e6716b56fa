// -ts auto and the predicted speed: each node's time per token from the bytes its stage reads per
// decoded token and the rates its own kernels stream each weight type at, plus the attention over the
// cache at the request's depth and the delta rule of Gated DeltaNet layers, at the node's measured
// per-element costs (tensor::NodeSpeed); the layer split with the least time per token within memory,
// and -sm tensor shares with equal times.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <set>

#include "gguf/names.h"
#include "plan/internal.h"

namespace strata::plan::detail {
namespace {

// A node that gets less than this share of the busiest node's time idles, with explicit flags, enough
// to say so (the "idle more than 30% of a token").
constexpr double kIdleWarning = 0.30;

// The one rule for what a stage reads of tensor `t` per decoded token: its slice (of routed experts,
// the share a token runs; of a tied head, its rows of token_embd). None for the embedding lookup (one
// row) and the MTP block (drafting only). `held`: in the node's layout (repacked sizes).
std::optional<uint64_t> token_read(const model::Model& model, const model::Model::Tensor& t, const model::StageConfig& st,
                                   bool held) {
  const model::HParams& hp = model.hparams();
  if (t.decl.mtp) return std::nullopt;
  if (t.decl.name == gguf::names::tensor::kTokenEmbd) {
    if (!st.output || model.has_output_weight()) return std::nullopt;
    const int64_t rows = st.shard.split() ? st.shard.vocab.size() : hp.n_vocab;
    return model::shard_tensor_bytes(model, t.decl.name, {}, held && st.repack) / uint64_t(hp.n_vocab) * uint64_t(rows);
  }
  uint64_t bytes = model::shard_tensor_bytes(hp, t.decl, *t.info, st.shard, st.input, held && st.repack);
  if (t.decl.n_experts > hp.n_expert_used && hp.n_expert_used > 0) {
    bytes = bytes / uint64_t(t.decl.n_experts) * uint64_t(hp.n_expert_used);
  }
  return bytes;
}

// Calls fn(tensor, bytes) for every tensor the stage reads per decoded token (token_read).
template <typename Fn>
void for_each_read(const model::Model& model, const model::StageConfig& st, bool held, Fn fn) {
  const std::set<std::string> has(st.tensors.begin(), st.tensors.end());
  for (const model::Model::Tensor& t : model.tensors()) {
    if (!has.count(t.decl.name)) continue;
    if (const auto bytes = token_read(model, t, st, held)) fn(t, *bytes);
  }
}

using Reads = std::vector<std::pair<DType, uint64_t>>;

// What one unit (a layer, or the output head) asks of a node per decoded token: its weight reads and
// the layer's own work (attention or delta rule) in the node's slice of its heads.
struct UnitWork {
  Reads reads;
  int32_t layer = -1;  // -1: the output head (products only)
};

// `slices`: as a -sm tensor member reads them (its slice rates where decoding measured them).
double read_seconds(const tensor::NodeSpeed& speed, DType type, uint64_t bytes, bool slices) {
  return slices ? speed.slice_seconds(type, bytes) : speed.seconds(type, bytes);
}

double seconds(const tensor::NodeSpeed& speed, const Reads& reads, bool slices) {
  double s = 0;
  for (const auto& [type, bytes] : reads) s += read_seconds(speed, type, bytes, slices);
  return s;
}

// Per unit (layers 0..n_layer-1, the output n_layer): its bytes per token, by type, on a node that
// holds it whole (the tied head's token_embd with the output).
std::vector<UnitWork> unit_work(const model::Model& model) {
  const int32_t n_layer = model.hparams().n_layer;
  model::StageConfig whole;
  whole.output = true;
  std::vector<UnitWork> units(static_cast<size_t>(n_layer) + 1);
  for (int32_t il = 0; il < n_layer; ++il) units[il].layer = il;
  for (const model::Model::Tensor& t : model.tensors()) {
    const auto bytes = token_read(model, t, whole, false);
    const int32_t unit = t.decl.name == gguf::names::tensor::kTokenEmbd ? n_layer : std::min(t.decl.layer, n_layer);
    if (bytes && unit >= 0) units[unit].reads.emplace_back(t.info->type, *bytes);
  }
  return units;
}

double seconds(const tensor::NodeSpeed& speed, const model::HParams& hp, const UnitWork& u, int64_t positions,
               bool slices = false) {
  const double products = seconds(speed, u.reads, slices);
  return u.layer < 0 ? products : products + layer_work_seconds(speed, hp, u.layer, positions);
}

// Componentwise what a node holds for one unit, on top of what it holds with none.
struct UnitBytes {
  uint64_t additive = 0;  // weights, KV, state, checkpoints
  uint64_t scratch = 0;   // not additive: the largest batch's scratch of any unit
};

uint64_t additive(const NodeBytes& b) { return sat_add(sat_add(b.weights, b.kv), sat_add(b.state, b.checkpoints)); }

}  // namespace

double layer_work_seconds(const tensor::NodeSpeed& speed, const model::HParams& hp, int32_t il, int64_t positions) {
  if (hp.is_recurrent(il)) {
    return speed.recurrent_seconds(int64_t{hp.ssm_n_v_heads} * hp.ssm_head_k_dim() * hp.ssm_head_v_dim());
  }
  if (hp.n_head_kv <= 0) return 0;
  return speed.attention_seconds(positions, hp.n_head_kv, int64_t{hp.head_dim_k} + hp.head_dim_v, hp.n_head / hp.n_head_kv);
}

int64_t attended_positions(const Request& request) {
  const int64_t per_seq = request.n_ctx / std::max(1, request.n_seq);
  return std::clamp<int64_t>(int64_t{request.depth} + 1, 1, std::max<int64_t>(1, per_seq));
}

bool speeds_known(const std::vector<Node>& nodes) {
  return std::all_of(nodes.begin(), nodes.end(), [](const Node& n) { return n.speed.known(); });
}

bool auto_split(const Request& request) {
  const bool ts_given = !request.tensor_split.empty();
  return request.tensor_split_auto || (!ts_given && request.n_gpu_layers < 0 && request.overrides.empty());
}

std::vector<double> speed_shares(const model::Model& model, const std::vector<Node>& nodes, const Request& request) {
  const auto units = unit_work(model);
  const int64_t positions = attended_positions(request);
  std::vector<double> shares;
  for (const Node& n : nodes) {
    double total = 0;
    for (const auto& u : units) total += seconds(n.speed, model.hparams(), u, positions, true);
    shares.push_back(total > 0 ? 1.0 / total : 0.0);
  }
  return shares;
}

namespace {

// What the layer split weighs, per node: seconds per token of every run of units, and whether a run
// fits the node's memory.
class LayerCosts {
 public:
  LayerCosts(const model::Model& model, const std::vector<Node>& nodes, const Request& request) : nodes_(nodes) {
    const int32_t n_units = model.hparams().n_layer + 1;
    const auto units = unit_work(model);
    const int64_t positions = attended_positions(request);
    const std::vector<int32_t> none(static_cast<size_t>(n_units), -1);
    empty_ = node_bytes(model, nodes, request, none);
    time_.assign(nodes.size(), std::vector<double>(n_units + 1, 0.0));
    mem_.assign(nodes.size(), std::vector<UnitBytes>(n_units));
    for (size_t n = 0; n < nodes.size(); ++n) {
      for (int32_t u = 0; u < n_units; ++u) {
        time_[n][u + 1] = time_[n][u] + seconds(nodes[n].speed, model.hparams(), units[u], positions);
        std::vector<int32_t> one(none);
        one[u] = static_cast<int32_t>(n);
        const NodeBytes b = node_bytes(model, nodes, request, one)[n];
        mem_[n][u] = {additive(b) - std::min(additive(b), additive(empty_[n])), b.scratch};
      }
    }
  }
  int32_t units() const { return static_cast<int32_t>(time_[0].size()) - 1; }
  // Units [a, b) on node n: their products, and a worker's hop in and out (half a round trip each).
  double seconds_for(size_t n, int32_t a, int32_t b) const {
    if (a == b) return 0;
    return time_[n][b] - time_[n][a] + nodes_[n].link_seconds;
  }
  // The largest b such that units [a, b) fit node n (a - 1 when not even none fit).
  int32_t fit_end(size_t n, int32_t a) const {
    const uint64_t limit = nodes_[n].memory_usable;
    if (empty_[n].total() > limit) return a - 1;
    uint64_t sum = additive(empty_[n]), scratch = empty_[n].scratch;
    int32_t b = a;
    for (; b < units(); ++b) {
      const uint64_t s = sat_add(sum, mem_[n][b].additive), sc = std::max(scratch, mem_[n][b].scratch);
      if (sat_add(s, sc) > limit) break;
      sum = s, scratch = sc;
    }
    return b;
  }

 private:
  const std::vector<Node>& nodes_;
  std::vector<NodeBytes> empty_;
  std::vector<std::vector<double>> time_;  // per node: prefix sums over units
  std::vector<std::vector<UnitBytes>> mem_;
};

struct LayerSplit {
  double total = 0;  // seconds per token of one sequence: every stage in turn
  double slowest = 0;
  std::vector<int32_t> owner;
};

// Contiguous runs in node order covering every unit, each node's run within its memory and `cap`
// seconds, with the smallest total (a dynamic program over (node, first unit it does not own)).
std::optional<LayerSplit> least_total(const LayerCosts& c, size_t n_nodes, double cap) {
  const int32_t n_units = c.units();
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(n_nodes + 1, std::vector<double>(n_units + 1, kNone));
  std::vector<std::vector<int32_t>> from(n_nodes + 1, std::vector<int32_t>(n_units + 1, -1));
  best[0][0] = 0;
  for (size_t n = 0; n < n_nodes; ++n) {
    for (int32_t i = 0; i <= n_units; ++i) {
      if (best[n][i] == kNone) continue;
      const int32_t end = c.fit_end(n, i);
      for (int32_t j = i; j <= end; ++j) {
        const double t = c.seconds_for(n, i, j);
        if (t > cap) break;
        if (best[n][i] + t < best[n + 1][j]) best[n + 1][j] = best[n][i] + t, from[n + 1][j] = i;
      }
    }
  }
  if (best[n_nodes][n_units] == kNone) return std::nullopt;
  LayerSplit s;
  s.total = best[n_nodes][n_units];
  s.owner.assign(static_cast<size_t>(n_units), 0);
  for (size_t n = n_nodes, j = n_units; n > 0; --n) {
    const int32_t i = from[n][j];
    for (int32_t u = i; u < static_cast<int32_t>(j); ++u) s.owner[u] = static_cast<int32_t>(n - 1);
    s.slowest = std::max(s.slowest, c.seconds_for(n - 1, i, static_cast<int32_t>(j)));
    j = static_cast<size_t>(i);
  }
  return s;
}

}  // namespace

// A token passes every stage in turn, so one sequence's time per token is the sum of the stages':
// the split with the least sum puts every layer it can on the fastest nodes. Among the splits within
// kEvenness of that sum, the one whose busiest node is least busy: equal nodes share the layers
// evenly (each keeps memory headroom) rather than one holding everything for a gain under 2% (about
// what the links of one more hop cost).
std::optional<std::vector<int32_t>> balance_layers(const model::Model& model, const std::vector<Node>& nodes,
                                                   const Request& request) {
  constexpr double kEvenness = 0.02;
  const LayerCosts costs(model, nodes, request);
  const auto fastest = least_total(costs, nodes.size(), std::numeric_limits<double>::infinity());
  if (!fastest) return std::nullopt;
  const double budget = fastest->total * (1 + kEvenness);
  LayerSplit chosen = *fastest;
  double lo = 0, hi = fastest->slowest;  // the least cap whose least total stays within budget
  for (int step = 0; step < 40 && hi - lo > 1e-6 * hi; ++step) {
    const double cap = (lo + hi) / 2;
    const auto s = least_total(costs, nodes.size(), cap);
    if (s && s->total <= budget) hi = cap, chosen = *s;
    else lo = cap;
  }
  return chosen.owner;
}

std::vector<std::pair<DType, uint64_t>> read_per_token(const model::Model& model, const model::StageConfig& st,
                                                       bool held) {
  std::vector<std::pair<DType, uint64_t>> out;
  for_each_read(model, st, held, [&](const model::Model::Tensor& t, uint64_t bytes) { out.emplace_back(t.info->type, bytes); });
  return out;
}

namespace {

// What the links add per token: a hop costs half its round trip; -sm tensor exchanges partial sums
// twice per layer, each as long as the slowest member's half round trip.
double link_seconds(const Plan& p, int32_t n_layer) {
  auto half = [&](int32_t n) { return n >= 0 && n < static_cast<int32_t>(p.nodes.size()) ? p.nodes[n].link_seconds / 2 : 0.0; };
  double s = 0;
  if (p.split_mode == SplitMode::kTensor) {
    double slowest = 0;
    for (int32_t m : p.tensor_group) {
      slowest = std::max(slowest, half(m));
      if (m != p.input_node) s += half(m);  // embeddings out, logits back
    }
    return s + 2.0 * n_layer * slowest;
  }
  for (const Transfer& t : p.transfers) s += std::max(half(t.from_node), half(t.to_node));
  return s;
}

}  // namespace

namespace {

// Where a tensor's products fall in a decoded token: a layer's attention or delta rule (with its
// norms), its FFN, or the output head. -sm tensor members add their partial sums after each of these
// sub-layers, so each ends at the slowest member.
size_t segment_of(const model::TensorDecl& d, int32_t n_layer) {
  if (d.name == gguf::names::tensor::kTokenEmbd || d.layer >= n_layer) return 2 * static_cast<size_t>(n_layer);  // the head
  if (d.layer < 0) return 0;
  const bool ffn = d.name.find(".ffn_") != std::string::npos || d.name.find(gguf::names::tensor::kPostAttentionNorm) != std::string::npos;
  return 2 * static_cast<size_t>(d.layer) + (ffn ? 1 : 0);
}

// Seconds a stage's decoded token takes on its node, per sub-layer (segment_of): its products and its
// layers' own work in its slice of the heads.
std::vector<double> segment_seconds(const model::Model& model, const Node& node, const model::StageConfig& st,
                                    int64_t positions) {
  const int32_t n_layer = model.hparams().n_layer;
  std::vector<double> seg(2 * static_cast<size_t>(n_layer) + 1, 0.0);
  const bool slices = st.shard.split();
  for_each_read(model, st, false, [&](const model::Model::Tensor& t, uint64_t bytes) {
    seg[segment_of(t.decl, n_layer)] += read_seconds(node.speed, t.info->type, bytes, slices);
  });
  const model::HParams hp = model::shard_hparams(model.hparams(), st.shard);
  for (int32_t il = 0; il < static_cast<int32_t>(st.owned.size()) && il < n_layer; ++il) {
    if (st.owned[il]) seg[2 * static_cast<size_t>(il)] += layer_work_seconds(node.speed, hp, il, positions);
  }
  return seg;
}

// "attention + MoE", "Gated DeltaNet + FFN": what layer il is made of.
std::string layer_kind(const model::Model& model, int32_t il) {
  bool moe = false;
  for (const model::Model::Tensor& t : model.tensors()) moe = moe || (t.decl.layer == il && t.decl.n_experts > 0 && !t.decl.mtp);
  return fmt::format("{} + {}", model.hparams().is_recurrent(il) ? "Gated DeltaNet" : "attention", moe ? "MoE" : "FFN");
}

// The first layer of each kind, and every node's tokens/s running it whole.
std::vector<LayerKindSpeed> layer_kind_speeds(const model::Model& model, const std::vector<Node>& nodes, int64_t positions) {
  const auto units = unit_work(model);
  std::vector<LayerKindSpeed> kinds;
  for (int32_t il = 0; il < model.hparams().n_layer; ++il) {
    std::string kind = layer_kind(model, il);
    if (std::any_of(kinds.begin(), kinds.end(), [&](const LayerKindSpeed& k) { return k.kind == kind; })) continue;
    LayerKindSpeed k{std::move(kind), il, {}};
    for (const Node& n : nodes) {
      const double s = seconds(n.speed, model.hparams(), units[il], positions);
      k.tokens_per_s.push_back(s > 0 ? 1.0 / s : 0.0);
    }
    kinds.push_back(std::move(k));
  }
  return kinds;
}

}  // namespace

void predict(const model::Model& model, const Request& request, bool explicit_flags, Plan& p) {
  if (!speeds_known(p.nodes)) return;
  const int64_t positions = attended_positions(request);
  p.predicted_depth = static_cast<int32_t>(positions - 1);
  p.layer_kinds = layer_kind_speeds(model, p.nodes, positions);
  p.predicted_ms.assign(p.nodes.size(), 0.0);
  std::vector<double> slowest_segment;  // -sm tensor: per sub-layer, its slowest member's seconds
  double busiest = 0, sum = 0;
  for (size_t n = 0; n < p.nodes.size() && n < p.node_stages.size(); ++n) {
    const std::vector<double> seg = segment_seconds(model, p.nodes[n], p.node_stages[n], positions);
    p.predicted_ms[n] = 1e3 * std::accumulate(seg.begin(), seg.end(), 0.0);
    busiest = std::max(busiest, p.predicted_ms[n]);
    sum += p.predicted_ms[n];
    slowest_segment.resize(seg.size(), 0.0);
    for (size_t i = 0; i < seg.size(); ++i) slowest_segment[i] = std::max(slowest_segment[i], seg[i]);
  }
  const double in_step = 1e3 * std::accumulate(slowest_segment.begin(), slowest_segment.end(), 0.0);
  p.predicted_link_ms = 1e3 * link_seconds(p, model.hparams().n_layer);
  const double token_ms = (p.split_mode == SplitMode::kTensor ? in_step : sum) + p.predicted_link_ms;
  p.predicted_tokens_per_s = token_ms > 0 ? 1e3 / token_ms : 0;
  if (!explicit_flags || busiest <= 0) return;
  for (size_t n = 0; n < p.predicted_ms.size(); ++n) {
    const bool runs = p.split_mode == SplitMode::kTensor
                          ? std::find(p.tensor_group.begin(), p.tensor_group.end(), static_cast<int32_t>(n)) != p.tensor_group.end()
                          : p.predicted_ms[n] > 0;
    const double idle = 1.0 - p.predicted_ms[n] / busiest;
    if (!runs || idle <= kIdleWarning) continue;
    p.warnings.push_back(fmt::format("{} is predicted idle {:.0f}% of the busiest node's time per token ({:.1f} of {:.1f} "
                                     "ms) with these flags; -ts auto places by the nodes' measured speeds",
                                     node_label(p.nodes, static_cast<int32_t>(n)), 100 * idle, p.predicted_ms[n], busiest));
  }
}

std::string predicted_times(const Plan& p) {
  std::string s;
  for (size_t n = 0; n < p.predicted_ms.size(); ++n) {
    s += fmt::format("{}{} {:.1f} ms", s.empty() ? "" : ", ", node_label(p.nodes, static_cast<int32_t>(n)), p.predicted_ms[n]);
  }
  return p.predicted_depth > 0 ? fmt::format("{} at depth {}", s, p.predicted_depth) : s;
}

}  // namespace strata::plan::detail
