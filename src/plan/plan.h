// The placement plan: the one place that says which node holds each layer's weights, KV cache and
// recurrent state, and runs its compute. Loading, allocation and execution read it; nothing else
// decides a location.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

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
  uint64_t scratch = 0;  // activations of the largest batch
  uint64_t total() const { return weights + kv + state + scratch; }
};

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
  uint64_t bytes_per_token = 0;
};

// One -ot rule: tensors whose name matches `pattern` (regex search) live on `node` (an index into the
// plan's nodes, resolved from local/CPU, host:port or RPC<n>[host:port]).
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
  std::vector<std::string> decisions;  // what was decided and why (logged at startup)
  std::vector<std::string> warnings;

  // Layers owned by `node`, as flags per layer.
  std::vector<uint8_t> owned_by(int32_t node) const;
  // Names of the tensors whose bytes live on `node`.
  std::vector<std::string> tensors_on(int32_t node) const;
};

// Plans `model` over `nodes` (nodes[0] is this machine). Refuses with an error naming the layers, the
// nodes and the fix when flags contradict each other or a node's total exceeds its limit.
Result<Plan> make_plan(const model::Model& model, const std::vector<Node>& nodes, const Request& request);

// This machine as a node: usable memory from cgroup limits and /proc/meminfo.
Node local_node(int32_t threads);

// The plan as a table (one row per node), then transfers, decisions and warnings.
std::string render(const Plan& plan);

}  // namespace strata::plan
