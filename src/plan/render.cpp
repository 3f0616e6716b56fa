// Text: byte counts, layer ranges, node names, and the plan as a table.
#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "plan/internal.h"

namespace strata::plan {
namespace detail {

std::string human_bytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / double(1 << 30));
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / double(1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024.0);
  return fmt::format("{} B", b);
}

std::string ranges(const std::vector<int32_t>& layers) {
  std::string s;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += j == i ? fmt::format("{}", layers[i]) : fmt::format("{}-{}", layers[i], layers[j]);
    i = j + 1;
  }
  return s;
}

std::string layers_phrase(const std::vector<int32_t>& layers) {
  return (layers.size() == 1 ? "layer " : "layers ") + ranges(layers);
}

std::string node_label(const std::vector<Node>& nodes, int32_t node) {
  if (node < 0 || node >= static_cast<int32_t>(nodes.size())) return fmt::format("node {}", node);
  const Node& n = nodes[node];
  if (!n.name.empty()) return n.name;
  if (!n.endpoint.empty()) return n.endpoint;
  return node == 0 ? "local" : fmt::format("node {}", node);
}

std::string node_spec(const std::vector<Node>& nodes, int32_t node) {
  if (node <= 0 || node >= static_cast<int32_t>(nodes.size()) || nodes[node].endpoint.empty()) return "local";
  return nodes[node].endpoint;
}

std::string join_values(const std::vector<double>& values) {
  std::string s;
  for (double v : values) s += fmt::format("{}{}", s.empty() ? "" : ",", v);
  return s;
}

std::string layers_with_output(const std::vector<int32_t>& all, int32_t n_layer) {
  std::vector<int32_t> layers;
  bool output = false;
  for (int32_t il : all) {
    if (il >= n_layer) output = true;
    else layers.push_back(il);
  }
  std::string s = layers.empty() ? "" : detail::layers_phrase(layers);
  if (output) s += s.empty() ? "the output layer" : " and the output layer";
  return s;
}

std::string rules_phrase(const std::vector<std::string>& rules) {
  std::string s = rules.size() == 1 ? "rule " : "rules ";
  for (size_t i = 0; i < rules.size(); ++i) s += fmt::format("{}'{}'", i ? ", " : "", rules[i]);
  return s;
}

std::string placement_summary(const std::vector<Node>& nodes, const std::vector<int32_t>& owner) {
  if (owner.empty()) return "";
  const int32_t n_layer = static_cast<int32_t>(owner.size()) - 1;
  std::string s;
  for (int32_t il = 0; il < n_layer;) {
    int32_t j = il;
    while (j + 1 < n_layer && owner[j + 1] == owner[il]) ++j;
    s += fmt::format("{}{} {}", s.empty() ? "layers " : ", ", j == il ? fmt::format("{}", il) : fmt::format("{}-{}", il, j),
                     node_label(nodes, owner[il]));
    il = j + 1;
  }
  return s + "; output " + node_label(nodes, owner[n_layer]);
}

}  // namespace detail

namespace {

// The predicted speed of one sequence, and what it rests on.
std::string predicted_text(const Plan& p) {
  if (p.predicted_ms.empty()) {
    std::string unknown;
    for (size_t n = 0; n < p.nodes.size(); ++n) {
      if (!p.nodes[n].speed.known()) unknown += (unknown.empty() ? "" : ", ") + detail::node_label(p.nodes, static_cast<int32_t>(n));
    }
    return "predicted: unknown (no measured speed for " + unknown + ")\n";
  }
  const double token_ms = p.predicted_tokens_per_s > 0 ? 1e3 / p.predicted_tokens_per_s : 0.0;
  std::string s = fmt::format("predicted: {:.1f} tokens/s for one sequence at depth {} ({:.2f} ms per token: {} {:.2f} ms "
                              "of products and layer work + {:.2f} ms on the links); ms/token is each node's share, from the "
                              "bytes it reads per token at its measured rate per weight type, and its attention over the "
                              "cache and delta rule at its measured cost per element\n",
                              p.predicted_tokens_per_s, p.predicted_depth, token_ms,
                              p.split_mode == SplitMode::kTensor ? "each sub-layer's slowest member (they add partial sums after each)," : "every stage in turn,",
                              token_ms - p.predicted_link_ms, p.predicted_link_ms);
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    s += fmt::format("  speed of {} ({} threads): {}\n", detail::node_label(p.nodes, static_cast<int32_t>(n)), p.nodes[n].threads,
                     p.nodes[n].speed.text());
  }
  for (const LayerKindSpeed& k : p.layer_kinds) {
    std::string per_node;
    for (size_t n = 0; n < k.tokens_per_s.size(); ++n) {
      per_node += fmt::format("{}{} {:.0f}", per_node.empty() ? "" : ", ", detail::node_label(p.nodes, static_cast<int32_t>(n)),
                              k.tokens_per_s[n]);
    }
    s += fmt::format("  one {} layer (layer {}), tokens/s: {}\n", k.kind, k.layer, per_node);
  }
  return s;
}

constexpr int kCols = 10;
struct Row {
  std::string cells[kCols];
};

// The layers a node's stage runs (under -sm tensor every member runs every layer on its slice).
std::vector<int32_t> stage_layers(const model::StageConfig* stage) {
  std::vector<int32_t> layers;
  for (size_t il = 0; stage && il < stage->owned.size(); ++il) {
    if (stage->owned[il]) layers.push_back(static_cast<int32_t>(il));
  }
  return layers;
}

// "input + 0-20 + output (slice)", or "-" for a node that runs nothing.
std::string owned_text(const Plan& p, int32_t node, const model::StageConfig* stage, const std::vector<int32_t>& layers) {
  std::string owned = detail::ranges(layers);
  if (node == p.input_node) owned = owned.empty() ? "input" : "input + " + owned;
  if (stage && stage->output) owned = owned.empty() ? "output" : owned + " + output";
  if (stage && stage->shard.split()) owned += " (slice)";
  if (owned.empty()) owned = "-";
  return owned;
}

Row node_row(const Plan& p, size_t n) {
  using detail::human_bytes;
  const int32_t node = static_cast<int32_t>(n);
  const model::StageConfig* stage = n < p.node_stages.size() ? &p.node_stages[n] : nullptr;
  const std::vector<int32_t> layers = stage_layers(stage);
  const NodeBytes b = n < p.bytes.size() ? p.bytes[n] : NodeBytes{};
  std::string kv_type = "-";  // K/V cache types, where the node keeps a cache
  if (n < p.node_stages.size() && b.kv > 0) {
    kv_type = memory::kv_type_name(p.node_stages[n].type_k) + "/" + memory::kv_type_name(p.node_stages[n].type_v);
  }
  const std::string limit = p.nodes[n].memory_usable == kUnlimited ? "unlimited" : human_bytes(p.nodes[n].memory_usable);
  const std::string weights = human_bytes(b.weights) + (b.repacked ? " (+" + human_bytes(b.repacked) + " repack)" : "");
  return {{detail::node_label(p.nodes, node), owned_text(p, node, stage, layers), fmt::format("{}", layers.size()), weights,
           human_bytes(b.kv), kv_type,
           human_bytes(b.state) + (b.checkpoints ? " + " + human_bytes(b.checkpoints) + " ckpt" : ""),
           human_bytes(b.scratch),
           human_bytes(b.total()) + " / " + limit,
           n < p.predicted_ms.size() ? fmt::format("{:.2f}", p.predicted_ms[n]) : "?"}};
}

// The rows in columns as wide as their widest cell: the first two left-aligned, the rest right-aligned.
std::string table_text(const std::vector<Row>& rows) {
  size_t width[kCols] = {};
  for (const Row& r : rows) {
    for (int c = 0; c < kCols; ++c) width[c] = std::max(width[c], r.cells[c].size());
  }
  std::string text;
  for (const Row& r : rows) {
    std::string line;
    for (int c = 0; c < kCols; ++c) {
      const bool left = c < 2;
      line += (c ? "  " : "") + (left ? fmt::format("{:<{}}", r.cells[c], width[c]) : fmt::format("{:>{}}", r.cells[c], width[c]));
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  }
  return text;
}

// -sm tensor: each member's slices and the weight bytes they read per token.
std::string slices_text(const Plan& p) {
  std::string s = "slices (-sm tensor; every member adds its partial sums after each attention and FFN sub-layer):\n";
  for (int32_t m : p.tensor_group) {
    s += fmt::format("  {}: {}; reads {} of weights per token\n", detail::node_label(p.nodes, m),
                     m < static_cast<int32_t>(p.slices.size()) ? p.slices[m] : "",
                     detail::human_bytes(m < static_cast<int32_t>(p.read_per_token.size()) ? p.read_per_token[m] : 0));
  }
  return s;
}

std::string transfers_text(const Plan& p) {
  if (p.transfers.empty()) return "transfers: none\n";
  std::string s = "transfers:\n";
  for (const Transfer& t : p.transfers) {
    s += fmt::format("  {} -> {}: {}, {} per token{}\n", detail::node_label(p.nodes, t.from_node),
                     detail::node_label(p.nodes, t.to_node), t.what, detail::human_bytes(t.bytes_per_token),
                     t.what == "logits" ? " that wants logits (8 bytes per candidate when sampling needs only "
                                          "its top-k)"
                                        : "");
  }
  return s;
}

// How the weights are laid out in memory: the repack share, and the nodes that keep the file's layout.
std::string layout_notes(const Plan& p) {
  std::string s;
  if (std::any_of(p.bytes.begin(), p.bytes.end(), [](const NodeBytes& b) { return b.repacked > 0; })) {
    s += "repack: matrices are repacked at load for the prompt kernels (16-row groups, K-quant scales "
         "unpacked: the \"repack\" share); the copy replaces the mapped file's pages\n";
  }
  for (size_t n = 0; n < p.nodes.size() && n < p.node_stages.size(); ++n) {
    if (p.node_stages[n].repack || p.node_stages[n].tensors.empty()) continue;
    s += fmt::format("kernels: {} does not repack (its kernels: {}); its weights stay in the file's layout\n",
                     detail::node_label(p.nodes, static_cast<int32_t>(n)), p.nodes[n].kernels_text());
  }
  return s;
}

}  // namespace

std::string render(const Plan& p) {
  std::vector<Row> rows;
  rows.push_back({{"node", "layers", "count", "weights", "KV", "KV type", "state", "scratch", "total / usable", "ms/token"}});
  for (size_t n = 0; n < p.nodes.size(); ++n) rows.push_back(node_row(p, n));
  // One node and no speed (a single-node run measures none): no prediction to show.
  const bool show_speed = !p.predicted_ms.empty() || p.nodes.size() > 1;
  if (!show_speed) {
    for (Row& r : rows) r.cells[kCols - 1].clear();
  }
  std::ostringstream out;
  out << table_text(rows);
  if (show_speed) out << predicted_text(p);
  if (p.split_mode == SplitMode::kTensor) out << slices_text(p);
  out << transfers_text(p) << layout_notes(p);
  for (const std::string& d : p.decision_texts()) out << "decision: " << d << "\n";
  for (const std::string& w : p.warnings) out << "warning: " << w << "\n";
  return out.str();
}

}  // namespace strata::plan
