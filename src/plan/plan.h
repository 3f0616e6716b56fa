// The placement plan: the one place that says which node holds each layer's weights, KV cache and
// recurrent state, and runs its compute. Loading, allocation and execution read it; nothing else
// decides a location.
//
// Flags keep llama.cpp's meanings (a llama.cpp command line can be pasted in):
//   --rpc h:p,...   the workers, in order: nodes[1..W]; nodes[0] is this machine (the coordinator).
//   -ngl N          the last N of the n_layer + 1 "layers" (the output head is layer n_layer) go to the
//                   workers, the rest stay on this machine (llama.cpp's dev_layer formula, exactly).
//   -ts a,b,...     ratios over the workers in --rpc order; with W + 1 values this machine comes first.
//                   Without -ngl it places every layer. All zeros: split by usable memory (llama.cpp's
//                   meaning).
//   -ts auto        the default when none of -ts, -ngl and -ot is given: every node's predicted time
//                   per token equal, within memory (balance.cpp), from each node's measured speed; by
//                   usable memory when a node's speed is unknown. The output head goes with the last layer.
//   -ot re=NODE,... weight pins (regex_search on the tensor name, first matching rule wins). A pin of
//                   all of a layer's tensors to one node makes that node the layer's owner, whatever the
//                   flags said (the plan says so in a decision; --strict-placement makes it an error).
//                   Pins that split one layer across nodes are refused (no intra-layer transfers yet).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/checked.h"
#include "base/result.h"
#include "model/model.h"
#include "model/stage_layout.h"
#include "plan/shards.h"
#include "tensor/node_speed.h"

namespace strata::plan {

inline constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

struct Node {
  std::string name;            // "local" or host:port
  std::string endpoint;        // host:port of a worker; empty for this machine
  uint64_t memory_usable = kUnlimited;  // what the plan may fill: memory available under the node's limit
  uint64_t memory_limit = kUnlimited;   // the limit itself (cgroup or physical memory), for display
  int32_t threads = 1;
  // What the node's kernels use (tensor::kernel_features: ISA features within its STRATA_MAX_ISA, and
  // "repack" when they repack matrices): every size that depends on the CPU is computed from these.
  std::vector<std::string> cpu_features;
  // How fast its kernels stream each weight type with its threads (measured once per host at its
  // start, tensor::cached_node_speed): the planner predicts its time per token from it.
  tensor::NodeSpeed speed;
  double link_seconds = 0;  // round trip from this machine (a Ping), 0 for this machine
  bool repacks() const;
  std::string kernels_text() const;  // the features, space-separated ("scalar" when none)
};

// Weights, KV cache, recurrent state and scratch of one node, sized by model::stage_bytes (the
// function the worker's admission check and the runner use too).
using NodeBytes = model::StageBytes;

// A run of consecutive layers on one node.
struct Stage {
  int32_t node = 0;
  int32_t first_layer = 0;
  int32_t end_layer = 0;  // one past the last
};

// An activation that crosses nodes.
struct Transfer {
  int32_t from_node = 0;
  int32_t to_node = 0;
  std::string what;              // e.g. "hidden state after layer 24", "logits"
  uint64_t bytes_per_token = 0;  // logits: per token that wants logits
};

// One -ot rule: tensors whose name matches `pattern` (regex search) live on `node_spec`, resolved to a
// node by resolve_node (local/CPU, host:port or RPC<n>[host:port]).
struct TensorOverride {
  std::string pattern;
  std::string node_spec;  // as the user wrote it
};

// -sm / --split-mode: layer (a pipeline: each layer on one node) or tensor (every layer sliced over a
// tensor group, model::Shard; the group adds its partial sums over data links twice per layer).
enum class SplitMode { kLayer, kTensor };
Result<SplitMode> parse_split_mode(std::string_view text);  // "layer" | "tensor" ("none" / "row": refused, named)

// What requests in flight do when a worker fails (--failover): off: they fail at once; wait: they
// wait for the worker to come back; replan: they wait a grace period for that, then the model is
// planned again over the nodes that answer when their memory allows it.
enum class Failover { kOff, kWait, kReplan };
const char* failover_name(Failover f);

struct Request {
  SplitMode split_mode = SplitMode::kLayer;
  int32_t n_ctx = 0;      // total context (all sequences)
  int32_t n_seq = 1;
  int32_t n_batch = 512;  // largest batch, sizes the scratch
  int32_t n_checkpoints = 0;  // recurrent-state checkpoints per sequence (the server's prompt cache)
  uint64_t cache_ram_bytes = 0;  // --cache-ram: each node's host memory for stashed sequences
  bool mtp = false;  // --spec-type draft-mtp: the output node also holds and runs the MTP block
  std::vector<double> tensor_split;       // -ts: ratios over the workers (or local + workers)
  bool tensor_split_auto = false;         // -ts auto (also what no -ts, -ngl or -ot means)
  ExpertSplit expert_split = ExpertSplit::kRows;  // --expert-split: how -sm tensor cuts routed experts
  int32_t n_gpu_layers = -1;              // -ngl: layers on the workers; -1 when not given
  std::vector<TensorOverride> overrides;  // -ot, in the order given
  bool strict_placement = false;          // an -ot pin that overrides -ts/-ngl is an error
  DType type_k = DType::F16;              // -ctk / -ctv: KV cache types (memory::kv_type_supported)
  DType type_v = DType::F16;
  Failover failover = Failover::kReplan;  // --failover
  int32_t recover_timeout_ms = 60000;     // --recover-timeout
  int32_t replan_grace_ms = 5000;         // replan: how long a worker that stopped answering is waited for
  std::vector<std::string> lost_nodes;    // set when planning again after these nodes failed
  // Tokens already in a sequence's context when it decodes: the depth -ts auto balances and the plan
  // predicts for (strata bench -d, strata plan -d); attention's share of a token grows with it.
  int32_t depth = 0;
};

// One layer of a kind the model has ("attention + FFN", "Gated DeltaNet + MoE"), as each node would
// run it whole at the predicted depth.
struct LayerKindSpeed {
  std::string kind;
  int32_t layer = 0;                // the first layer of the kind
  std::vector<double> tokens_per_s;  // per node
};

// One thing the planner decided, and why: data for /v1/cluster and tests; describe() gives the sentence.
struct Decision {
  enum class Kind {
    kSingleNode,      // no workers: every layer here
    kSplitByMemory,   // no -ts/-ngl: layers split by usable memory
    kSplitBySpeed,    // -ts auto: layers (or slices) split so every node's predicted time per token is equal
    kSplitByFlags,    // -ts and/or -ngl placed the layers
    kPinsAgree,       // -ot pins agree with the flags: nothing moved
    kPinMovedLayers,  // -ot pins moved whole layers (weights, cache, state and compute) to a node
    kFinalPlacement,  // where every layer ended up after the pins
    kTiedHeadCopy,    // the output node holds a copy of token_embd for its tied head
    kTensorSplit,     // -sm tensor: every layer sliced over the group (detail: the slices and why)
    kFailover,        // what requests in flight do when a worker fails (detail: lost nodes when replanned)
  };
  Kind kind = Kind::kSingleNode;
  std::string flags;               // the flags that decided: "-ts 1,1", "-ngl 30", "the split by usable memory"
  std::string detail;              // how they applied: " over W1, W2", " (layers 21-39 + output offloaded ...)"
  std::vector<int32_t> layers;     // the layers concerned (n_layer is the output head)
  int32_t node = -1;               // where they went
  int32_t from_node = -1;          // kPinMovedLayers: where the flags had put them
  std::vector<std::string> rules;  // kPinMovedLayers: the -ot rules ("pattern=node")
  std::string agreeing_flags;      // kPinMovedLayers: a -ts giving the same placement, or why none can
  std::vector<int32_t> owner;      // split and final decisions: owners of layers 0..n_layer
  bool all_zero_split = false;     // -ts was all zeros, so usable memory split the layers (as in llama.cpp)
  std::string why;                 // kTensorSplit: why a cut is made as it is (routed experts by rows)
};
// "split_by_flags", "pin_moved_layers", ...
std::string_view kind_name(Decision::Kind kind);

struct Plan {
  std::vector<Node> nodes;           // nodes[0] is this machine (the coordinator)
  std::vector<int32_t> layer_owner;  // per layer: index into nodes
  int32_t input_node = 0;            // token embeddings: always the coordinator
  int32_t output_node = 0;           // output norm + head
  std::vector<Stage> stages;         // in execution order
  std::vector<Transfer> transfers;
  std::vector<NodeBytes> bytes;      // per node
  std::map<std::string, int32_t> tensor_home;  // every model tensor -> the node whose part of the model it is
  // Per node, everything about its stage: the layers it runs, whether it embeds or computes logits, every
  // tensor whose bytes it holds (model::tensors_needed: rope factors and a tied head's copy included),
  // its cache shape and threads. Loading, binding and the worker's checks read this and nothing else.
  std::vector<model::StageConfig> node_stages;
  std::vector<Decision> decisions;     // what was decided and why (logged at startup)
  SplitMode split_mode = SplitMode::kLayer;
  // -sm tensor: the members of the tensor group in member order (node indices); each member's slice is
  // node_stages[node].shard. Every member runs every layer; layer_owner names the first member.
  std::vector<int32_t> tensor_group;
  std::vector<uint64_t> read_per_token;  // -sm tensor: weight bytes each node reads per token (its slices)
  std::vector<std::string> slices;       // -sm tensor: each node's slices in words (empty: not a member)
  std::vector<std::string> warnings;
  // Predicted from the nodes' measured speeds (0 where a speed is unknown): per node, the ms its
  // one-token products and its layers' attention / delta rule take per token; the ms the links add
  // per token; tokens/s of one sequence.
  std::vector<double> predicted_ms;
  double predicted_link_ms = 0;
  double predicted_tokens_per_s = 0;
  int32_t predicted_depth = 0;             // the context depth the prediction is for
  std::vector<LayerKindSpeed> layer_kinds;  // predicted per node for one layer of each kind

  // Layers owned by `node`, as flags per layer.
  std::vector<uint8_t> owned_by(int32_t node) const;
  // Each decision as a sentence (describe).
  std::vector<std::string> decision_texts() const;
  // Names of the tensors whose bytes `node` holds (node_stages[node].tensors).
  const std::vector<std::string>& tensors_on(int32_t node) const;
};

// Refuses sequences, context, batch or checkpoints that no stage could run (model::check_stage's
// bounds), naming the flag; make_plan checks it first, the engine before it reaches any worker.
Status check_request(const Request& request);

// Plans `model` over `nodes` (nodes[0] is this machine). Refuses with an error naming the layers, the
// nodes and the fix when flags contradict each other or a node's total exceeds its limit; the error's
// code says which refusal it was: kInvalidArgument (bad flags, unknown node, bad regex, -ts count, ...),
// kPlacementRefused (--strict-placement and an -ot pin overrides -ts/-ngl), kSplitLayer (-ot pins split
// one layer's weights across nodes) or kResourceExhausted (a node's total exceeds its limit).
Result<Plan> make_plan(const model::Model& model, const std::vector<Node>& nodes, const Request& request);

// This machine as a node: usable memory and limit from cgroup limits and /proc/meminfo (nodes.cpp).
Node local_node(int32_t threads);
// A worker as a node (name = endpoint), from the memory it reports.
// A worker as its Hello describes it; without cpu_features it is planned as not repacking.
Node worker_node(std::string endpoint, uint64_t memory_usable, int32_t threads, uint64_t memory_limit = kUnlimited,
                 std::vector<std::string> cpu_features = {});

// A decision as the sentence logs, `strata plan` and /v1/cluster show (the only place that words it).
std::string describe(const std::vector<Node>& nodes, int32_t n_layer, const Decision& d);

// The plan as a table (one row per node), then transfers, decisions and warnings.
std::string render(const Plan& plan);

// ---- Flag parsing for the CLI (llama.cpp syntax) ----

// -ot / --override-tensor: "regex=NODE,regex2=NODE2". A comma separates rules only once the text before
// it holds a '=' and balanced (), {} and [] (so 'blk\.[0-9]{1,2}\.=W' is one rule); NODE is after the
// last '='. Every regex is compiled (ECMAScript) here, and errors name the rule. NODE is resolved later,
// against the node list (resolve_node).
Result<std::vector<TensorOverride>> parse_overrides(std::string_view text);

// -ts / --tensor-split: "3,2" (or "3/2" like llama.cpp); each value finite and >= 0.
Result<std::vector<double>> parse_tensor_split(std::string_view text);

// --rpc: "host:port,host:port" ([v6]:port accepted); ports 1..65535; no duplicates.
Result<std::vector<std::string>> parse_rpc_list(std::string_view text);

// An -ot NODE: "local" / "CPU" (any case) -> 0; a worker's "host:port"; llama.cpp's buffer name
// "RPC<n>[host:port]" (the endpoint picks the worker). The error lists the valid names.
Result<int32_t> resolve_node(const std::vector<Node>& nodes, std::string_view spec);

}  // namespace strata::plan
