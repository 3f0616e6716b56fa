// The placement plan: the one place that says which node holds each layer's weights, KV cache and
// recurrent state, and runs its compute. Loading, allocation and execution read it; nothing else
// decides a location.
//
// Flags keep llama.cpp's meanings (a llama.cpp command line can be pasted in):
//   --rpc h:p,...   the workers, in order: nodes[1..W]; nodes[0] is this machine (the coordinator).
//   -ngl N          the last N of the n_layer + 1 "layers" (the output head is layer n_layer) go to the
//                   workers, the rest stay on this machine (llama.cpp's dev_layer formula, exactly).
//   -ts a,b,...     ratios over the workers in --rpc order; with W + 1 values this machine comes first.
//                   Without -ngl it places every layer. All zeros: as if not given (split by memory).
//   neither         every layer split over all nodes (this machine included) by usable memory; the
//                   output head goes with the last layer.
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

namespace strata::plan {

inline constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

struct Node {
  std::string name;            // "local" or host:port
  std::string endpoint;        // host:port of a worker; empty for this machine
  uint64_t memory_limit = kUnlimited;  // usable bytes (cgroup-aware)
  int32_t threads = 1;
  bool is_local() const { return endpoint.empty(); }
};

struct NodeBytes {
  uint64_t weights = 0;
  uint64_t kv = 0;
  uint64_t state = 0;    // recurrent state (conv + delta-rule matrices)
  uint64_t scratch = 0;  // activations of the largest batch (formula below)
  uint64_t total() const { return sat_add(sat_add(weights, kv), sat_add(state, scratch)); }
};

// Scratch estimate per node, for the largest batch (n_batch tokens), in f32:
//   a node that runs layers:  n_batch * (4*n_embd + q + k + v + attn_out + 3*ff) + threads * n_ctx_per_seq
//     (residual, norm, projection out, the q/k/v/attention rows, gate/up, a quantized copy of the widest
//     input, and one row of attention scores per thread; ff = max(n_ff, n_expert_used * n_ff_expert +
//     n_ff_shared_expert))
//   the output node:          + n_batch * (n_embd + n_vocab)   (normed rows and logits)
//   node 0 (the coordinator): + n_batch * n_embd (embedded rows) + n_batch * n_vocab if the logits come
//                               from another node
// all times sizeof(float).

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

struct Request {
  int32_t n_ctx = 0;      // total context (all sequences)
  int32_t n_seq = 1;
  int32_t n_batch = 512;  // largest batch, sizes the scratch
  std::vector<double> tensor_split;       // -ts: ratios over the workers (or local + workers)
  int32_t n_gpu_layers = -1;              // -ngl: layers on the workers; -1 when not given
  std::vector<TensorOverride> overrides;  // -ot, in the order given
  bool strict_placement = false;          // an -ot pin that overrides -ts/-ngl is an error
};

struct Plan {
  std::vector<Node> nodes;           // nodes[0] is this machine (the coordinator)
  std::vector<int32_t> layer_owner;  // per layer: index into nodes
  int32_t input_node = 0;            // token embeddings: always the coordinator
  int32_t output_node = 0;           // output norm + head
  std::vector<Stage> stages;         // in execution order
  std::vector<Transfer> transfers;
  std::vector<NodeBytes> bytes;      // per node
  std::map<std::string, int32_t> tensor_home;  // every model tensor -> node holding its bytes
  // Per node: tensors whose bytes that node needs besides those homed there (their home is elsewhere,
  // counted in this node's weights as well). With a tied head (no output.weight) the output node needs
  // token_embd.weight; every node running layers needs rope_freqs.weight when the model has it.
  std::vector<std::vector<std::string>> extra_tensors;
  std::vector<std::string> decisions;  // what was decided and why (logged at startup)
  std::vector<std::string> warnings;

  // Layers owned by `node`, as flags per layer.
  std::vector<uint8_t> owned_by(int32_t node) const;
  // Names of the tensors whose bytes `node` needs: those homed there, then its extra_tensors.
  std::vector<std::string> tensors_on(int32_t node) const;
};

// Plans `model` over `nodes` (nodes[0] is this machine). Refuses with an error naming the layers, the
// nodes and the fix when flags contradict each other or a node's total exceeds its limit; the error's
// code says which refusal it was: kInvalidArgument (bad flags, unknown node, bad regex, -ts count, ...),
// kPlacementRefused (--strict-placement and an -ot pin overrides -ts/-ngl), kSplitLayer (-ot pins split
// one layer's weights across nodes) or kResourceExhausted (a node's total exceeds its limit).
Result<Plan> make_plan(const model::Model& model, const std::vector<Node>& nodes, const Request& request);

// This machine as a node: usable memory from cgroup limits and /proc/meminfo.
Node local_node(int32_t threads);
// A worker as a node (name = endpoint).
Node worker_node(std::string endpoint, uint64_t memory_limit, int32_t threads);

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
