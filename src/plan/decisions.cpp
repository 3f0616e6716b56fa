// Decisions in words: every sentence the planner says about what it decided comes from here.
#include <fmt/format.h>

#include "plan/internal.h"

namespace strata::plan {
using detail::node_label;

std::string_view kind_name(Decision::Kind kind) {
  switch (kind) {
    case Decision::Kind::kSingleNode: return "single_node";
    case Decision::Kind::kSplitByMemory: return "split_by_memory";
    case Decision::Kind::kSplitByFlags: return "split_by_flags";
    case Decision::Kind::kSplitBySpeed: return "split_by_speed";
    case Decision::Kind::kPinsAgree: return "pins_agree";
    case Decision::Kind::kPinMovedLayers: return "pin_moved_layers";
    case Decision::Kind::kFinalPlacement: return "final_placement";
    case Decision::Kind::kTiedHeadCopy: return "tied_head_copy";
    case Decision::Kind::kTensorSplit: return "tensor_split";
    case Decision::Kind::kFailover: return "failover";
  }
  return "unknown";
}

std::string describe(const std::vector<Node>& nodes, int32_t n_layer, const Decision& d) {
  const std::string zero = d.all_zero_split ? " (-ts all zero: split by usable memory, as llama.cpp does)" : "";
  using K = Decision::Kind;
  switch (d.kind) {
    case K::kSingleNode:
      return fmt::format("all {} layers on {} (single node)", n_layer, node_label(nodes, 0));
    case K::kSplitByMemory:
      return fmt::format("split by usable memory: {} -> {}{}", d.detail, detail::placement_summary(nodes, d.owner), zero);
    case K::kSplitBySpeed:
      return fmt::format("-ts auto: the layers split for the least predicted time per token within memory (a token "
                         "passes every stage in turn, so the faster nodes take the layers; nodes within 2% share them "
                         "evenly), from each node's measured speed ({}) -> {}",
                         d.detail, detail::placement_summary(nodes, d.owner));
    case K::kSplitByFlags:
      return fmt::format("{}{} -> {}{}", d.flags, d.detail, detail::placement_summary(nodes, d.owner), zero);
    case K::kPinsAgree:
      return fmt::format("-ot pins agree with {}: no layer moved", d.flags);
    case K::kPinMovedLayers: {
      const bool one = d.layers.size() == 1;
      return fmt::format(
          "-ot decides {}: {} pins all {} tensors to {}, which owns {} weights, KV cache, recurrent state and compute; "
          "{} had put {} on {}. A -ts that agrees: {}",
          detail::layers_with_output(d.layers, n_layer), detail::rules_phrase(d.rules), one ? "its" : "their", node_label(nodes, d.node),
          one ? "its" : "their", d.flags, one ? "it" : "them", node_label(nodes, d.from_node), d.agreeing_flags);
    }
    case K::kFinalPlacement:
      return "final placement: " + detail::placement_summary(nodes, d.owner);
    case K::kTensorSplit:
      return fmt::format("-sm tensor: all {} layers sliced over {} by {}{}{}", n_layer, d.detail, d.flags, zero,
                         d.why.empty() ? "" : "; " + d.why);
    case K::kFailover:
      return d.detail.empty() ? d.flags + ": " + d.why : fmt::format("{}: planned again over the nodes that answer, without {}", d.flags, d.detail);
    case K::kTiedHeadCopy:
      return fmt::format("the output head is tied to token_embd.weight: {} holds a copy of it besides {}",
                         node_label(nodes, d.node), node_label(nodes, 0));
  }
  return "";
}

const char* failover_name(Failover f) {
  switch (f) {
    case Failover::kOff: return "off";
    case Failover::kWait: return "wait";
    case Failover::kReplan: return "replan";
  }
  return "?";
}

// Said in every plan over workers, so that what a node's death does is known before it happens.
Decision detail::failover_decision(const Request& r) {
  Decision d;
  d.kind = Decision::Kind::kFailover;
  d.flags = fmt::format("--failover {} --recover-timeout {}", failover_name(r.failover), r.recover_timeout_ms / 1000);
  for (const std::string& n : r.lost_nodes) d.detail += (d.detail.empty() ? "" : ", ") + n;
  const std::string wait = fmt::format("requests in flight wait up to {} s and then go on from their tokens", r.recover_timeout_ms / 1000);
  switch (r.failover) {
    case Failover::kOff: d.why = "a worker's failure ends the requests in flight with an error naming it"; break;
    case Failover::kWait: d.why = "when a worker fails, " + wait + " once it is back"; break;
    case Failover::kReplan:
      d.why = fmt::format("when a worker fails, {}; it is waited for {} s, then the model is planned again over the "
                          "nodes that answer if their memory holds it",
                          wait, r.replan_grace_ms / 1000.0);
      break;
  }
  return d;
}

std::vector<std::string> Plan::decision_texts() const {
  std::vector<std::string> out;
  for (const Decision& d : decisions) out.push_back(describe(nodes, static_cast<int32_t>(layer_owner.size()), d));
  return out;
}

}  // namespace strata::plan
