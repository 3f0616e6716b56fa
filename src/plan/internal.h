// Pieces of the planner shared by its files (not part of the plan API).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace strata::plan::detail {

// ---- text ----
std::string human_bytes(uint64_t b);
// Sorted layer indices as ranges: "0-20, 25, 30-39".
std::string ranges(const std::vector<int32_t>& layers);
// "layer 5" / "layers 0-20, 25".
std::string layers_phrase(const std::vector<int32_t>& layers);
// "layers 3-5 and the output layer" (n_layer stands for the output layer).
std::string layers_with_output(const std::vector<int32_t>& layers, int32_t n_layer);
// "rule 'a=b'" / "rules 'a=b', 'c=d'".
std::string rules_phrase(const std::vector<std::string>& rules);
// How a node is shown: its name, else its endpoint, else "local".
std::string node_label(const std::vector<Node>& nodes, int32_t node);
// How to name a node in an -ot rule: "local" or host:port.
std::string node_spec(const std::vector<Node>& nodes, int32_t node);
// "3,2" (shortest round-trip form of each value).
std::string join_values(const std::vector<double>& values);
// Where each layer (0..n_layer, n_layer = output) goes, in layer order: "layers 0-20 A, 21-39 B; output B".
std::string placement_summary(const std::vector<Node>& nodes, const std::vector<int32_t>& owner);

// ---- llama.cpp's layer split (dev_layer) ----
// Owners of layers 0..n_layer (n_layer = the output layer). Layers outside the offloaded range stay on
// node 0; the others go to devices[upper_bound(cumulative normalized ratios, (il - i_start) / act)],
// computed in float as llama.cpp does. Ratios must be finite and >= 0; all zero splits evenly.
std::vector<int32_t> split_layers(int32_t n_layer, const std::vector<int32_t>& devices,
                                  const std::vector<float>& ratios, int64_t n_offload);
// -ts values as llama.cpp's floats (values beyond float range are scaled down first).
std::vector<float> ratios_as_float(const std::vector<double>& values);

// The placement the flags (-ts, -ngl, or the memory split) give, before any -ot pin.
struct FlagSplit {
  std::vector<int32_t> owner;        // n_layer + 1 entries, the last one the output layer
  bool explicit_flags = false;       // -ts (not all zero) or -ngl given: --strict-placement applies
  bool output_follows_last = false;  // memory split: the output goes where the last layer ends up
  std::string flag_text;             // "-ts 1,1", "-ngl 30", "the split by usable memory", ...
  Decision decision;
  std::vector<std::string> warnings;
};
Result<FlagSplit> split_by_flags(int32_t n_layer, const std::vector<Node>& nodes, const Request& request);

// A -ts that gives exactly `owner` (n_layer + 1 entries, output last) under llama.cpp's formula.
struct TsSuggestion {
  std::string flag;    // "-ts 25,16"
  std::string detail;  // "(25 layers on A, 15 layers + output on B)"
};
std::optional<TsSuggestion> agreeing_tensor_split(const std::vector<Node>& nodes, const std::vector<int32_t>& owner,
                                                  const Request& request);
// The suggestion as a phrase: "-ts 25,16 (...)" or an explanation why no -ts can express `owner`.
std::string agreeing_phrase(const std::vector<Node>& nodes, const std::vector<int32_t>& owner, const Request& request);

// ---- -ot pins ----
// Checks an -ot pattern before std::regex sees it: not empty, not too long (its compiler recurses), and
// no group repeated by *, + or {n,...} that itself holds an unbounded quantifier ((.*)*, (a+){2}):
// std::regex backtracks through those in exponential time, even on short tensor names.
Status check_pattern(std::string_view pattern);
struct Pins {
  std::vector<int32_t> node;  // per model tensor (model.tensors() order): pinned node, or -1
  std::vector<int32_t> rule;  // per model tensor: index of the winning rule, or -1
  std::vector<std::string> rule_text;  // per rule: "pattern=node_spec"
  std::vector<std::string> warnings;
};
Result<Pins> match_pins(const model::Model& model, const std::vector<Node>& nodes,
                        const std::vector<TensorOverride>& overrides);

// Final owners of layers 0..n_layer after the pins, with decisions and warnings; refuses split layers
// (ErrorCode::kSplitLayer) and, with --strict-placement, pins that override -ts/-ngl (kPlacementRefused).
struct Resolution {
  std::vector<int32_t> owner;
  std::vector<Decision> decisions;
  std::vector<std::string> warnings;
};
Result<Resolution> resolve_layers(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                                  const FlagSplit& flags, const Pins& pins);

// ---- bytes ----
// What a node does in a stage: the layers it runs, whether it embeds, computes logits or drafts, and
// its tensor-split slice.
struct StageRole {
  std::vector<uint8_t> owned;  // per layer
  bool input = false;
  bool output = false;
  bool mtp = false;
  model::Shard shard;
};
// The one place a stage is filled: the role, the tensors it reads, the request's cache shape and the
// node's own threads and kernels (repack).
model::StageConfig make_stage(const model::Model& model, const Node& node, const Request& request, StageRole role);
// Per node, its stage when layers 0..n_layer are owned per `owner` (the output layer last).
std::vector<model::StageConfig> node_stages(const model::Model& model, const std::vector<Node>& nodes,
                                           const Request& request, const std::vector<int32_t>& owner);
// What each of these stages needs (model::stage_bytes).
std::vector<NodeBytes> node_bytes(const model::Model& model, const std::vector<model::StageConfig>& stages);
// What each node needs when layers 0..n_layer are owned per `owner` (the output layer last).
std::vector<NodeBytes> node_bytes(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                                  const std::vector<int32_t>& owner);
// Refuses (naming every node over its limit, with numbers and a fix) when a node does not fit.
Status check_budget(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                    const std::vector<int32_t>& owner, const std::vector<NodeBytes>& bytes);

// ---- speed (balance.cpp) ----
bool speeds_known(const std::vector<Node>& nodes);
// -ts auto, or what none of -ts, -ngl and -ot means.
bool auto_split(const Request& request);
// Per node, its -sm tensor share under -ts auto: 1 / its predicted time for the whole model, read as
// slices (tensor::NodeSpeed::slice_seconds).
std::vector<double> speed_shares(const model::Model& model, const std::vector<Node>& nodes, const Request& request);
// Cached positions a decoded token attends to at the request's depth (within a sequence's context).
int64_t attended_positions(const Request& request);
// Seconds of layer il's own work beside its products on a node of this speed: attention over
// `positions` cached positions, or a Gated DeltaNet layer's delta rule (hp: the node's slice).
double layer_work_seconds(const tensor::NodeSpeed& speed, const model::HParams& hp, int32_t il, int64_t positions);
// Owners of layers 0..n_layer (contiguous, in node order) that make the slowest node's predicted time
// per token as small as every node's memory allows; nullopt when no split fits.
std::optional<std::vector<int32_t>> balance_layers(const model::Model& model, const std::vector<Node>& nodes,
                                                   const Request& request);
// Bytes of weights `stage` reads per decoded token, by type: its slices of every matrix, the used share
// of routed experts, a tied head's rows of token_embd; not the embedding lookup (one row) nor the MTP
// block. `held`: in the node's layout (repacked sizes), else the file's.
std::vector<std::pair<DType, uint64_t>> read_per_token(const model::Model& model, const model::StageConfig& stage,
                                                       bool held);
// Fills the plan's predicted times when every node's speed is known; with explicit flags, warns about
// a node predicted idle more than 30% of the busiest node's time.
void predict(const model::Model& model, const Request& request, bool explicit_flags, Plan& p);
// "local 10.2 ms, 10.0.0.2:50052 9.8 ms"
std::string predicted_times(const Plan& p);

// ---- -sm tensor ----
// The plan of a tensor split (tensor_split.cpp): the group, each member's shard, bytes and exchanges.
// `nodes` have their names set.
Result<Plan> make_tensor_plan(const model::Model& model, std::vector<Node> nodes, const Request& request);
// The layer or tensor placement make_plan() then completes with the failover decision.
Result<Plan> place(const model::Model& model, const std::vector<Node>& nodes, const Request& request);
// What requests in flight do when a worker fails, and the nodes lost when planned again (decisions.cpp).
Decision failover_decision(const Request& request);

}  // namespace strata::plan::detail
