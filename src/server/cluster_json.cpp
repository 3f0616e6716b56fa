#include "server/cluster_json.h"

#include "memory/kv_cache.h"

namespace strata::server {
namespace {

nlohmann::json bytes_or_null(uint64_t b) { return b == plan::kUnlimited ? nlohmann::json(nullptr) : nlohmann::json(b); }

// A decision as fields (kind, the layers and nodes it concerns) plus its sentence.
nlohmann::json decision_json(const plan::Plan& p, const plan::Decision& d) {
  auto name = [&](int32_t n) {
    return n >= 0 && n < static_cast<int32_t>(p.nodes.size()) ? nlohmann::json(p.nodes[n].name) : nlohmann::json(nullptr);
  };
  nlohmann::json j = {{"kind", plan::kind_name(d.kind)},
                      {"text", plan::describe(p.nodes, static_cast<int32_t>(p.layer_owner.size()), d)}};
  if (!d.flags.empty()) j["flags"] = d.flags;
  if (!d.layers.empty()) j["layers"] = d.layers;
  if (d.node >= 0) j["node"] = name(d.node);
  if (d.from_node >= 0) j["from_node"] = name(d.from_node);
  if (!d.rules.empty()) j["rules"] = d.rules;
  if (!d.agreeing_flags.empty()) j["agreeing_flags"] = d.agreeing_flags;
  if (!d.why.empty()) j["why"] = d.why;
  if (!d.owner.empty()) {  // the node of each layer, the output head last
    nlohmann::json placement = nlohmann::json::array();
    for (int32_t n : d.owner) placement.push_back(name(n));
    j["placement"] = placement;
  }
  return j;
}

}  // namespace

nlohmann::json cluster_json(const runtime::Engine& engine, const Scheduler& scheduler, const std::string& model_id) {
  using nlohmann::json;
  const plan::Plan p = engine.plan_snapshot();
  const auto health = engine.node_health();
  json nodes = json::array();
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    json layers = json::array();
    for (const plan::Stage& s : p.stages) {
      if (s.node == static_cast<int32_t>(n)) layers.push_back({s.first_layer, s.end_layer - 1});
    }
    bool up = true;
    double ping_ms = 0;
    for (const auto& h : health) {
      if (h.node == p.nodes[n].name) up = h.reachable, ping_ms = h.ping_ms;
    }
    const plan::NodeBytes& b = p.bytes[n];
    nodes.push_back({{"name", p.nodes[n].name},
                     {"endpoint", p.nodes[n].endpoint},
                     {"layers", layers},
                     {"input", p.input_node == static_cast<int32_t>(n)},
                     {"output", p.output_node == static_cast<int32_t>(n)},
                     {"bytes", {{"weights", b.weights}, {"kv", b.kv}, {"state", b.state}, {"checkpoints", b.checkpoints}, {"scratch", b.scratch},
                                {"total", b.total()}}},
                     {"memory_usable", bytes_or_null(p.nodes[n].memory_usable)},
                     {"memory_limit", bytes_or_null(p.nodes[n].memory_limit)},
                     {"type_k", n < p.node_stages.size() ? memory::kv_type_name(p.node_stages[n].type_k) : "f16"},
                     {"type_v", n < p.node_stages.size() ? memory::kv_type_name(p.node_stages[n].type_v) : "f16"},
                     {"threads", p.nodes[n].threads},
                     {"up", up},
                     {"ping_ms", ping_ms}});
  }
  json transfers = json::array();
  for (const plan::Transfer& t : p.transfers) {
    transfers.push_back({{"from", p.nodes[t.from_node].name}, {"to", p.nodes[t.to_node].name}, {"what", t.what},
                         {"bytes_per_token", t.bytes_per_token}});
  }
  json prediction = nullptr;  // unknown without every node's measured speed
  if (!p.predicted_ms.empty()) {
    json ms = json::object();
    for (size_t n = 0; n < p.predicted_ms.size() && n < p.nodes.size(); ++n) ms[p.nodes[n].name] = p.predicted_ms[n];
    prediction = {{"depth", p.predicted_depth}, {"tokens_per_second", p.predicted_tokens_per_s},
                  {"ms_per_token", ms}, {"link_ms", p.predicted_link_ms}};
  }
  json decisions = json::array();
  for (const plan::Decision& d : p.decisions) decisions.push_back(decision_json(p, d));
  const model::HParams& hp = engine.hparams();
  const SchedulerStats s = scheduler.stats();
  return {{"model", model_id},
          {"architecture", hp.arch},
          {"n_layer", hp.n_layer},
          {"n_params", engine.model().n_params()},
          {"n_ctx_per_slot", engine.n_ctx_per_seq()},
          {"slots", scheduler.n_slots()},
          {"nodes", nodes},
          {"transfers", transfers},
          {"decisions", decisions},
          {"prediction", prediction},
          {"warnings", p.warnings},
          {"stats", {{"queue_depth", s.queue_depth}, {"active_slots", s.active_slots},
                     {"generated_tokens", s.generated_tokens}, {"prompt_tokens", s.prompt_tokens},
                     {"tokens_per_second", s.decode_seconds > 0 ? (s.prompt_tokens + s.generated_tokens) / s.decode_seconds : 0.0}}}};
}

}  // namespace strata::server
