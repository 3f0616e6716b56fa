// -ot pins: matching rules to tensors, and deciding each layer's owner from the pins and the flags.
#include <fmt/format.h>

#include <algorithm>
// GCC 12 reports a false -Wmaybe-uninitialized inside <regex>'s std::function states at -O2 (GCC bug
// 105562); the warning is about the library's code, not this file's.
#ifndef __clang__  // clang has no such warning (and warns about the unknown name)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <regex>
#include <set>
#include <tuple>

#include "gguf/names.h"
#include "plan/internal.h"

namespace strata::plan::detail {
namespace {

constexpr size_t kMaxPattern = 1000;  // keeps std::regex's recursive compiler within its stack

// A {n}, {n,} or {n,m} quantifier at p[i] == '{': its length, whether it repeats (m > 1 or no m), and
// whether it is unbounded. Anything else is a literal brace (length 0).
size_t brace_quantifier(std::string_view p, size_t i, bool* repeats, bool* unbounded) {
  const size_t close = p.find('}', i);
  if (close == std::string_view::npos) return 0;
  const std::string_view body = p.substr(i + 1, close - i - 1);
  const size_t comma = body.find(',');
  const std::string_view lo = body.substr(0, comma), hi = comma == std::string_view::npos ? lo : body.substr(comma + 1);
  auto digits = [](std::string_view d) { return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; }); };
  if (lo.empty() || !digits(lo) || !digits(hi) || lo.size() > 9 || hi.size() > 9) return 0;
  *unbounded = comma != std::string_view::npos && hi.empty();
  *repeats = *unbounded || std::stoul(std::string(hi)) > 1;
  return close - i + 1;
}

std::string op_of(const model::Model::Tensor& t, int32_t n_layer) {
  if (t.decl.layer >= n_layer) return "output head";
  const std::string& name = t.decl.name;
  const std::string prefix = gguf::names::layer_prefix(t.decl.layer);
  const std::string suffix = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
  if (suffix.rfind("attn_", 0) == 0) return "attention";
  if (suffix.rfind("ffn_", 0) == 0) return "feed-forward";
  return "other";
}

std::string layer_name(int32_t il, int32_t n_layer) {
  return il >= n_layer ? std::string("the output layer") : fmt::format("layer {}", il);
}

// An -ot rule that pins exactly this layer.
std::string whole_layer_rule(const std::vector<Node>& nodes, int32_t il, int32_t n_layer, int32_t node) {
  const std::string pattern = il >= n_layer ? std::string("^output") : fmt::format("blk\\.{}\\.", il);
  return fmt::format("-ot '{}={}'", pattern, node_spec(nodes, node));
}

struct Placed {
  size_t tensor;
  int32_t node;
  std::string source;  // "-ot rule '...'" or the flags
};

// The message for a layer whose tensors land on several nodes.
std::string split_message(const model::Model& model, const std::vector<Node>& nodes, int32_t il,
                          const std::vector<Placed>& placed, int32_t pin_node) {
  const int32_t n_layer = model.hparams().n_layer;
  // Group by op, then by (node, source), keeping declaration order.
  std::vector<std::string> ops;
  for (const Placed& p : placed) {
    const std::string op = op_of(model.tensors()[p.tensor], n_layer);
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  auto groups_of = [&](const std::string* op) {
    std::vector<std::tuple<int32_t, std::string, std::vector<std::string>>> groups;
    for (const Placed& p : placed) {
      if (op && op_of(model.tensors()[p.tensor], n_layer) != *op) continue;
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return std::get<0>(g) == p.node && std::get<1>(g) == p.source; });
      if (it == groups.end()) {
        groups.emplace_back(p.node, p.source, std::vector<std::string>{});
        it = groups.end() - 1;
      }
      std::get<2>(*it).push_back(model.tensors()[p.tensor].decl.name);
    }
    return groups;
  };
  auto describe = [&](const auto& g) {
    std::string names;
    for (const std::string& n : std::get<2>(g)) names += (names.empty() ? "" : ", ") + n;
    return fmt::format("on {} ({}, by {})", node_label(nodes, std::get<0>(g)), names, std::get<1>(g));
  };
  std::string body;
  for (const std::string& op : ops) {
    std::set<int32_t> op_nodes;
    for (const auto& g : groups_of(&op)) op_nodes.insert(std::get<0>(g));
    if (op_nodes.size() < 2) continue;
    std::string parts;
    for (const auto& g : groups_of(&op)) parts += (parts.empty() ? "" : " and ") + describe(g);
    body = fmt::format("its {} op would need operands on {} nodes: {}", op, op_nodes.size(), parts);
    break;
  }
  if (body.empty()) {
    std::string parts;
    for (const std::string& op : ops) {
      for (const auto& g : groups_of(&op)) parts += fmt::format("{}the {} op {}", parts.empty() ? "" : "; ", op, describe(g));
    }
    body = "its ops would run on different nodes and exchange the hidden state inside the layer: " + parts;
  }
  return fmt::format("-ot splits {} across nodes: {}. Explicit cross-node transfers inside a layer are not supported "
                     "yet; pin the whole layer to one node, e.g. {}",
                     layer_name(il, n_layer), body, whole_layer_rule(nodes, il, n_layer, pin_node));
}

// Layers a pin moved away from where the flags put them, grouped by (pinned node, flag node, rules).
struct Moved {
  int32_t to = 0;
  int32_t from = 0;
  std::set<int32_t> rules;
  std::vector<int32_t> layers;  // output layer = n_layer
};

std::string moved_layers(const Moved& m, int32_t n_layer) { return layers_with_output(m.layers, n_layer); }

std::string rules_phrase(const Moved& m, const Pins& pins) {
  std::vector<std::string> rules;
  for (int32_t r : m.rules) rules.push_back(pins.rule_text[r]);
  return detail::rules_phrase(rules);
}

// Per layer 0..n_layer (n_layer = the output layer), its tensors' indices in model.tensors().
std::vector<std::vector<size_t>> tensors_by_layer(const model::Model& model) {
  const int32_t n_layer = model.hparams().n_layer;
  const auto& tensors = model.tensors();
  std::vector<std::vector<size_t>> by_layer(static_cast<size_t>(n_layer) + 1);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int layer = tensors[t].decl.layer;
    // MTP blocks follow the output head wherever it goes: a pin on them cannot split it.
    if (layer >= 0 && !tensors[t].decl.mtp) by_layer[std::min(layer, n_layer)].push_back(t);
  }
  return by_layer;
}

// One layer's tensors and where each goes: its pin, else the node the flags gave the layer.
struct LayerTensors {
  std::vector<Placed> placed;
  std::set<int32_t> nodes;  // every node its tensors land on
  std::set<int32_t> rules;  // the rules that pinned any of them
  bool any_pin = false;
  bool any_free = false;  // a tensor no rule pinned
  int32_t pin_node = -1;  // the first pinned tensor's node
};

LayerTensors place_layer_tensors(const std::vector<size_t>& layer_tensors, int32_t flag_owner, const FlagSplit& flags,
                                 const Pins& pins) {
  LayerTensors lt;
  for (size_t t : layer_tensors) {
    if (pins.node[t] >= 0) {
      lt.any_pin = true;
      if (lt.pin_node < 0) lt.pin_node = pins.node[t];
      lt.rules.insert(pins.rule[t]);
      lt.placed.push_back({t, pins.node[t], fmt::format("-ot rule '{}'", pins.rule_text[pins.rule[t]])});
      lt.nodes.insert(pins.node[t]);
    } else {
      lt.any_free = true;
      lt.placed.push_back({t, flag_owner, flags.flag_text});
      lt.nodes.insert(flag_owner);
    }
  }
  return lt;
}

void record_move(std::vector<Moved>& moved, int32_t to, int32_t from, const std::set<int32_t>& rules, int32_t il) {
  auto it = std::find_if(moved.begin(), moved.end(),
                         [&](const Moved& m) { return m.to == to && m.from == from && m.rules == rules; });
  if (it == moved.end()) {
    moved.push_back({to, from, rules, {}});
    it = moved.end() - 1;
  }
  it->layers.push_back(il);
}

// What the pins did to the layers: the moves of whole layers, and the layers they would split.
struct LayerPins {
  std::vector<Moved> moved;
  std::vector<int32_t> split_layers;
  std::string first_split;  // the message for the first split layer
};

// Gives each layer wholly pinned to one node that node in `owner` (the flags' owners).
LayerPins apply_pins_to_layers(const model::Model& model, const std::vector<Node>& nodes, const FlagSplit& flags,
                               const Pins& pins, std::vector<int32_t>& owner) {
  const int32_t n_layer = model.hparams().n_layer;
  const std::vector<std::vector<size_t>> by_layer = tensors_by_layer(model);
  LayerPins lp;
  for (int32_t il = 0; il <= n_layer; ++il) {
    // After the last layer's pins, so the output follows where the last layer ended up.
    if (il == n_layer && flags.output_follows_last) owner[n_layer] = owner[n_layer - 1];
    const int32_t flag_owner = owner[il];
    const LayerTensors lt = place_layer_tensors(by_layer[il], flag_owner, flags, pins);
    if (!lt.any_pin) continue;
    if (lt.nodes.size() > 1) {
      lp.split_layers.push_back(il);
      if (lp.first_split.empty()) lp.first_split = split_message(model, nodes, il, lt.placed, lt.pin_node);
      continue;
    }
    const int32_t pinned_owner = *lt.nodes.begin();
    if (!lt.any_free && pinned_owner != flag_owner) record_move(lp.moved, pinned_owner, flag_owner, lt.rules, il);
    owner[il] = pinned_owner;
  }
  return lp;
}

// The first split layer in full, the others named.
Error split_layers_error(const LayerPins& lp, int32_t n_layer) {
  std::string more;
  if (lp.split_layers.size() > 1) {
    std::vector<int32_t> rest(lp.split_layers.begin() + 1, lp.split_layers.end());
    const bool output = rest.back() >= n_layer;
    if (output) rest.pop_back();
    std::string what = rest.empty() ? "" : layers_phrase(rest);
    if (output) what += what.empty() ? "the output layer" : " and the output layer";
    more = fmt::format(" (the same holds for {})", what);
  }
  return make_error(ErrorCode::kSplitLayer, "plan: {}{}", lp.first_split, more);
}

// Whether `node` reads tensor `name` anyway when the layers are owned per `owner`.
bool node_reads_tensor(const model::Model& model, const std::vector<int32_t>& owner, int32_t node,
                       const std::string& name) {
  const int32_t n_layer = model.hparams().n_layer;
  std::vector<uint8_t> owned(static_cast<size_t>(n_layer), 0);
  for (int32_t il = 0; il < n_layer; ++il) owned[il] = owner[il] == node ? 1 : 0;
  const auto needed = model::tensors_needed(model, owned, false, owner[n_layer] == node);
  return std::find(needed.begin(), needed.end(), name) != needed.end();
}

// The input (token embeddings) always stays on the coordinator: a pin of an input tensor elsewhere is
// ignored with a warning, or refused under --strict-placement.
Status check_input_pins(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                        const Pins& pins, const std::vector<int32_t>& owner, std::vector<std::string>& warnings) {
  const auto& tensors = model.tensors();
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].decl.layer >= 0 || pins.node[t] <= 0) continue;
    const std::string& name = tensors[t].decl.name;
    // A pin to a node that reads the tensor anyway (a tied head, rope factors) changes nothing.
    if (node_reads_tensor(model, owner, pins.node[t], name)) continue;
    const std::string msg = fmt::format(
        "-ot rule '{}' pins {} to {}, but input tensors stay on {} (the coordinator embeds the tokens)",
        pins.rule_text[pins.rule[t]], name, node_label(nodes, pins.node[t]), node_label(nodes, 0));
    if (request.strict_placement) {
      return make_error(ErrorCode::kPlacementRefused,
                        "plan: --strict-placement: {}; drop that pin (e.g. put '{}=local' first)", msg,
                        name == gguf::names::tensor::kTokenEmbd ? "token_embd" : "rope_freqs");
    }
    warnings.push_back(msg + "; the pin is ignored");
  }
  return {};
}

Decision pins_agree_decision(const FlagSplit& flags) {
  Decision d;
  d.kind = Decision::Kind::kPinsAgree;
  d.flags = flags.flag_text;
  return d;
}

// --strict-placement and pins that moved layers away from where -ts/-ngl put them.
Error strict_placement_error(const std::vector<Node>& nodes, const FlagSplit& flags, const Pins& pins,
                             const std::vector<Moved>& moved, const std::string& agree, int32_t n_layer) {
  std::string conflicts;
  for (const Moved& m : moved) {
    conflicts += fmt::format("{}-ot {} pins {} to {}, but {} puts {} on {}", conflicts.empty() ? "" : "; ",
                             rules_phrase(m, pins), moved_layers(m, n_layer), node_label(nodes, m.to), flags.flag_text,
                             m.layers.size() == 1 ? "it" : "them", node_label(nodes, m.from));
  }
  return make_error(ErrorCode::kPlacementRefused,
                    "plan: --strict-placement: {}. Make the flags agree, e.g. {}, or drop --strict-placement to let "
                    "-ot decide",
                    conflicts, agree);
}

// A decision per move, then where every layer ended up.
void add_pin_move_decisions(const FlagSplit& flags, const Pins& pins, const std::vector<Moved>& moved,
                            const std::string& agree, Resolution& res) {
  for (const Moved& m : moved) {
    Decision d;
    d.kind = Decision::Kind::kPinMovedLayers;
    d.flags = flags.flag_text;
    d.layers = m.layers;
    d.node = m.to;
    d.from_node = m.from;
    d.agreeing_flags = agree;
    for (int32_t r : m.rules) d.rules.push_back(pins.rule_text[r]);
    res.decisions.push_back(std::move(d));
  }
  Decision final_placement;
  final_placement.kind = Decision::Kind::kFinalPlacement;
  final_placement.owner = res.owner;
  res.decisions.push_back(std::move(final_placement));
}

}  // namespace

Status check_pattern(std::string_view p) {
  if (p.empty()) return make_error("empty pattern");
  if (p.size() > kMaxPattern) return make_error("pattern longer than {} characters", kMaxPattern);
  std::vector<bool> open;  // per open group: its body holds an unbounded quantifier
  bool in_class = false, after_group = false, group_unbounded = false;
  auto mark = [&] {
    if (!open.empty()) open.back() = true;
  };
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    const bool follows_group = after_group;
    after_group = false;
    if (c == '\\') {
      ++i;
      continue;
    }
    if (in_class) {
      in_class = c != ']';
      continue;
    }
    bool repeats = false, unbounded = false;
    switch (c) {
      case '[': in_class = true; break;
      case '(': open.push_back(false); break;
      case ')':
        if (open.empty()) break;
        group_unbounded = open.back();
        open.pop_back();
        if (group_unbounded) mark();
        after_group = true;
        break;
      case '*':
      case '+': repeats = unbounded = true; break;
      case '{':
        if (size_t n = brace_quantifier(p, i, &repeats, &unbounded)) i += n - 1;
        break;
      default: break;
    }
    if (repeats && follows_group && group_unbounded) {
      return make_error("a repeated group holds an unbounded quantifier (like (.*)* or (a+){{2}}), which std::regex "
                        "matches in exponential time; write it without the nesting");
    }
    if (unbounded) mark();
  }
  return {};
}

Result<Pins> match_pins(const model::Model& model, const std::vector<Node>& nodes,
                        const std::vector<TensorOverride>& overrides) {
  Pins pins;
  const auto& tensors = model.tensors();
  pins.node.assign(tensors.size(), -1);
  pins.rule.assign(tensors.size(), -1);
  std::vector<std::regex> res;
  std::vector<int32_t> rule_node;
  for (const TensorOverride& o : overrides) {
    const std::string text = o.pattern + "=" + o.node_spec;
    pins.rule_text.push_back(text);
    if (auto ok = check_pattern(o.pattern); !ok) {
      return make_error("plan: -ot rule '{}': {}", text.size() > 80 ? text.substr(0, 80) + "..." : text, ok.error().message);
    }
    try {
      res.emplace_back(o.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return make_error("plan: -ot rule '{}': invalid regex '{}': {}", text, o.pattern, e.what());
    }
    auto node = resolve_node(nodes, o.node_spec);
    if (!node) return make_error("plan: -ot rule '{}': {}", text, node.error().message);
    rule_node.push_back(*node);
  }
  std::vector<size_t> matched(overrides.size(), 0), won(overrides.size(), 0);
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (size_t r = 0; r < res.size(); ++r) {
      bool hit = false;
      try {
        hit = std::regex_search(tensors[t].decl.name, res[r]);
      } catch (const std::regex_error& e) {
        return make_error("plan: -ot rule '{}' failed on tensor '{}': {}", pins.rule_text[r], tensors[t].decl.name, e.what());
      }
      if (!hit) continue;
      ++matched[r];
      if (pins.rule[t] < 0) {
        pins.rule[t] = static_cast<int32_t>(r);
        pins.node[t] = rule_node[r];
        ++won[r];
      }
    }
  }
  for (size_t r = 0; r < overrides.size(); ++r) {
    if (matched[r] == 0) {
      pins.warnings.push_back(fmt::format("-ot rule '{}' matches no tensor of this model", pins.rule_text[r]));
    } else if (won[r] == 0) {
      pins.warnings.push_back(fmt::format(
          "-ot rule '{}' has no effect: every tensor it matches was already placed by an earlier rule (first match wins)",
          pins.rule_text[r]));
    }
  }
  return pins;
}

Result<Resolution> resolve_layers(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                                  const FlagSplit& flags, const Pins& pins) {
  const int32_t n_layer = model.hparams().n_layer;
  Resolution res;
  res.owner = flags.owner;
  const LayerPins layer_pins = apply_pins_to_layers(model, nodes, flags, pins, res.owner);
  if (!layer_pins.split_layers.empty()) return split_layers_error(layer_pins, n_layer);
  STRATA_TRY(check_input_pins(model, nodes, request, pins, res.owner, res.warnings));
  if (layer_pins.moved.empty()) {
    if (!request.overrides.empty() && flags.explicit_flags) res.decisions.push_back(pins_agree_decision(flags));
    return res;
  }
  const std::string agree = agreeing_phrase(nodes, res.owner, request);
  if (flags.explicit_flags && request.strict_placement) {
    return strict_placement_error(nodes, flags, pins, layer_pins.moved, agree, n_layer);
  }
  add_pin_move_decisions(flags, pins, layer_pins.moved, agree, res);
  return res;
}

}  // namespace strata::plan::detail
