// make_plan: flags -> layer split -> -ot pins -> owners, stages, transfers, bytes, budget check.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "gguf/names.h"
#include "plan/internal.h"
#include "plan/plan.h"

namespace strata::plan {
namespace {

Status validate(const model::Model& model, const std::vector<Node>& nodes, const Request& r) {
  if (nodes.empty()) return make_error("plan: no nodes");
  if (model.hparams().n_layer < 1) return make_error("plan: the model has no layers");
  STRATA_TRY(check_request(r));
  if (nodes.size() > 4096) return make_error("plan: {} nodes is too many", nodes.size());
  const model::HParams& hp = model.hparams();
  for (const auto& [flag, type, head_dim] : {std::tuple{"-ctk", r.type_k, hp.head_dim_k}, std::tuple{"-ctv", r.type_v, hp.head_dim_v}}) {
    if (!memory::kv_type_supported(type)) {
      return make_error("plan: {} {}: {}", flag, memory::kv_type_name(type),
                        memory::parse_kv_type(memory::kv_type_name(type)).error().message);
    }
    const int64_t block = info(type).block_elems;
    if (head_dim % block != 0) {
      return make_error("plan: {} {} stores blocks of {} elements, but this model's head_dim is {} (not a multiple of {})",
                        flag, memory::kv_type_name(type), block, head_dim, block);
    }
  }
  std::set<std::string> seen;
  for (size_t i = 1; i < nodes.size(); ++i) {
    if (nodes[i].endpoint.empty()) return make_error("plan: worker {} ('{}') has no endpoint", i, nodes[i].name);
    if (!seen.insert(nodes[i].endpoint).second) return make_error("plan: worker '{}' is listed twice", nodes[i].endpoint);
  }
  return {};
}

}  // namespace

Status check_request(const Request& r) {
  if (r.n_seq < 1 || r.n_seq > model::kMaxStageSeqs) {
    return make_error("plan: number of sequences {} out of range 1..{} (-np)", r.n_seq, model::kMaxStageSeqs);
  }
  if (r.n_ctx < 1) return make_error("plan: context size {} must be positive (-c)", r.n_ctx);
  if (r.n_ctx < r.n_seq) return make_error("plan: context {} is smaller than the number of sequences {}", r.n_ctx, r.n_seq);
  if (r.n_ctx / r.n_seq > model::kMaxStageContext) {
    return make_error("plan: context of {} tokens per sequence is over {} (-c / -np)", r.n_ctx / r.n_seq,
                      model::kMaxStageContext);
  }
  if (r.n_batch < 1 || r.n_batch > model::kMaxStageBatch) {
    return make_error("plan: batch size {} out of range 1..{} (-b)", r.n_batch, model::kMaxStageBatch);
  }
  if (r.n_checkpoints < 0 || r.n_checkpoints > model::kMaxStageCheckpoints) {
    return make_error("plan: {} state checkpoints per sequence out of range 0..{} (--ctx-checkpoints)", r.n_checkpoints,
                      model::kMaxStageCheckpoints);
  }
  if (r.depth < 0 || r.depth >= r.n_ctx / r.n_seq) {
    return make_error("plan: depth {} is outside a sequence's context of {} tokens (-d/--n-depth)", r.depth, r.n_ctx / r.n_seq);
  }
  return {};
}

namespace {

void add_stages_and_transfers(Plan& p, const model::HParams& hp) {
  const int32_t n_layer = hp.n_layer;
  for (int32_t il = 0; il < n_layer;) {
    int32_t end = il + 1;
    while (end < n_layer && p.layer_owner[end] == p.layer_owner[il]) ++end;
    p.stages.push_back({p.layer_owner[il], il, end});
    il = end;
  }
  const uint64_t hidden = uint64_t(hp.n_embd) * sizeof(float);
  int32_t at = p.input_node;
  for (const Stage& s : p.stages) {
    if (s.node != at) {
      p.transfers.push_back({at, s.node,
                             s.first_layer == 0 ? std::string("embeddings (input of layer 0)")
                                                : fmt::format("hidden state after layer {}", s.first_layer - 1),
                             hidden});
    }
    at = s.node;
  }
  if (p.output_node != at) {
    p.transfers.push_back({at, p.output_node, fmt::format("hidden state after layer {}", n_layer - 1), hidden});
  }
  if (p.output_node != p.input_node) {
    p.transfers.push_back({p.output_node, p.input_node, "logits", uint64_t(hp.n_vocab) * sizeof(float)});
  }
}

// -ts auto over several nodes whose speeds are known: the split by speed replaces the flags' split
// (by usable memory), before any -ot pin.
bool split_by_speed(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                    detail::FlagSplit& flags) {
  if (nodes.size() < 2 || !detail::auto_split(request)) return false;
  if (!detail::speeds_known(nodes)) {
    if (request.tensor_split_auto) {
      flags.warnings.push_back("-ts auto: a node's speed is unknown (a worker that measured none), so the layers are "
                               "split by usable memory");
    }
    return false;
  }
  auto owner = detail::balance_layers(model, nodes, request);
  if (!owner) return false;  // nothing fits: the memory split's refusal names the fix
  flags.owner = *owner;
  flags.output_follows_last = false;  // the split placed the output head too
  flags.flag_text = "-ts auto";
  flags.decision.kind = Decision::Kind::kSplitBySpeed;
  flags.decision.flags = flags.flag_text;
  flags.decision.owner = *owner;
  return true;
}

// Every node named: this machine "local", a worker by its endpoint (unless it has a name).
std::vector<Node> named_nodes(std::vector<Node> nodes) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name.empty()) nodes[i].name = i == 0 ? "local" : nodes[i].endpoint;
  }
  return nodes;
}

// Who owns each layer, and how that was decided.
struct LayerOwners {
  detail::FlagSplit flags;
  bool by_speed = false;  // the split by speed replaced the flags' split
  detail::Pins pins;
  detail::Resolution res;  // res.owner: the final owners of layers 0..n_layer
};

// The flags' split (or the split by speed), then the -ot pins on it. Errors without a code of their
// own are invalid arguments.
Result<LayerOwners> decide_owners(const model::Model& model, const std::vector<Node>& nodes, const Request& request) {
  LayerOwners o;
  auto flags = detail::split_by_flags(model.hparams().n_layer, nodes, request);
  if (!flags) return with_code(std::move(flags).error(), ErrorCode::kInvalidArgument);
  o.flags = std::move(*flags);
  o.by_speed = split_by_speed(model, nodes, request, o.flags);
  auto pins = detail::match_pins(model, nodes, request.overrides);
  if (!pins) return with_code(std::move(pins).error(), ErrorCode::kInvalidArgument);
  o.pins = std::move(*pins);
  auto res = detail::resolve_layers(model, nodes, request, o.flags, o.pins);
  if (!res) return with_code(std::move(res).error(), ErrorCode::kInvalidArgument);
  o.res = std::move(*res);
  return o;
}

// The pipeline for `owner` (layers 0..n_layer, the output last): stages, transfers, each tensor's
// home, and each node's stage and bytes.
Plan layer_layout(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                  const std::vector<int32_t>& owner) {
  const model::HParams& hp = model.hparams();
  const int32_t n_layer = hp.n_layer;
  Plan p;
  p.nodes = nodes;
  p.layer_owner.assign(owner.begin(), owner.end() - 1);
  p.input_node = 0;
  p.output_node = owner[n_layer];
  add_stages_and_transfers(p, hp);
  for (const model::Model::Tensor& t : model.tensors()) {
    p.tensor_home[t.decl.name] = t.decl.layer < 0 ? p.input_node : owner[std::min(t.decl.layer, n_layer)];
  }
  p.node_stages = detail::node_stages(model, nodes, request, owner);
  p.bytes = detail::node_bytes(model, p.node_stages);
  return p;
}

// The plan says who holds token_embd; a node other than the coordinator holding it is the tied
// head's copy.
void add_tied_head_decision(Plan& p, int32_t n_layer) {
  const auto& head_tensors = p.tensors_on(p.output_node);
  const bool head_copy = p.output_node != p.input_node &&
                         std::find(head_tensors.begin(), head_tensors.end(), gguf::names::tensor::kTokenEmbd) !=
                             head_tensors.end();
  if (!head_copy) return;
  Decision d;
  d.kind = Decision::Kind::kTiedHeadCopy;
  d.layers = {n_layer};
  d.node = p.output_node;
  p.decisions.push_back(std::move(d));
}

void warn_nodes_without_layers(Plan& p, const std::vector<int32_t>& owner) {
  for (size_t n = 1; n < p.nodes.size(); ++n) {
    const int32_t node = static_cast<int32_t>(n);
    if (std::find(owner.begin(), owner.end(), node) == owner.end()) {
      p.warnings.push_back(fmt::format("{} gets no layers: it holds nothing and runs nothing", detail::node_label(p.nodes, node)));
    }
  }
}

}  // namespace

Result<Plan> make_plan(const model::Model& model, const std::vector<Node>& nodes, const Request& request) {
  STRATA_ASSIGN(Plan p, detail::place(model, nodes, request));
  if (nodes.size() > 1 || !request.lost_nodes.empty()) p.decisions.push_back(detail::failover_decision(request));
  return p;
}

namespace detail {

Result<Plan> place(const model::Model& model, const std::vector<Node>& nodes_in, const Request& request) {
  auto refuse = [](ErrorCode code, Error e) { return with_code(std::move(e), code); };
  if (auto s = validate(model, nodes_in, request); !s) return refuse(ErrorCode::kInvalidArgument, std::move(s).error());
  std::vector<Node> nodes = named_nodes(nodes_in);
  if (request.mtp) {
    if (auto s = model.mtp_available(); !s) {
      return refuse(ErrorCode::kInvalidArgument, make_error("--spec-type draft-mtp: {}", s.error().message));
    }
  }
  if (request.split_mode == SplitMode::kTensor) {
    auto tensor = detail::make_tensor_plan(model, std::move(nodes), request);
    if (!tensor && tensor.error().code == ErrorCode::kUnknown) return refuse(ErrorCode::kInvalidArgument, std::move(tensor).error());
    return tensor;
  }
  STRATA_ASSIGN(LayerOwners owners, decide_owners(model, nodes, request));
  const std::vector<int32_t>& owner = owners.res.owner;
  Plan p = layer_layout(model, nodes, request, owner);
  p.decisions.push_back(owners.flags.decision);
  for (Decision& d : owners.res.decisions) p.decisions.push_back(std::move(d));
  add_tied_head_decision(p, model.hparams().n_layer);
  for (auto* list : {&owners.flags.warnings, &owners.pins.warnings, &owners.res.warnings}) {
    for (std::string& w : *list) p.warnings.push_back(std::move(w));
  }
  warn_nodes_without_layers(p, owner);
  if (auto s = detail::check_budget(model, nodes, request, owner, p.bytes); !s) {
    return refuse(ErrorCode::kResourceExhausted, std::move(s).error());
  }
  detail::predict(model, request, owners.flags.explicit_flags, p);
  if (owners.by_speed) p.decisions.front().detail = detail::predicted_times(p);
  return p;
}

}  // namespace detail
}  // namespace strata::plan
