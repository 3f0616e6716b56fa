// The placement plan: the one place that says which node holds each layer's weights, KV cache and
// recurrent state, and runs its compute. Loading, allocation and execution read it; nothing else
// decides a location.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/model.h"

namespace strata::plan {

struct Node {
  std::string name;            // "local" or host:port
  uint64_t memory_limit = 0;   // usable bytes (cgroup-aware)
  int32_t threads = 1;
};

struct NodeBytes {
  uint64_t weights = 0;
  uint64_t kv = 0;
  uint64_t state = 0;
  uint64_t scratch = 0;
  uint64_t total() const { return weights + kv + state + scratch; }
};

// A run of consecutive layers on one node.
struct Stage {
  int32_t node = 0;
  int32_t first_layer = 0;
  int32_t end_layer = 0;  // one past the last
};

struct Request {
  int32_t n_ctx = 0;      // total context (all sequences)
  int32_t n_seq = 1;
  int32_t n_batch = 512;  // largest batch, sizes the scratch
};

struct Plan {
  std::vector<Node> nodes;
  std::vector<int32_t> layer_owner;  // per layer: index into nodes
  int32_t input_node = 0;            // token embeddings (the coordinator)
  int32_t output_node = 0;           // output norm + head
  std::vector<Stage> stages;
  std::vector<NodeBytes> bytes;      // per node
  std::vector<std::string> notes;    // what was decided and why

  // Layers owned by `node`, as flags per layer.
  std::vector<uint8_t> owned_by(int32_t node) const;
};

// Plans `model` over `nodes` (nodes[0] is this machine). Refuses, naming the node and the numbers,
// when a node's total exceeds its limit.
Result<Plan> make_plan(const model::Model& model, const std::vector<Node>& nodes, const Request& request);

// This machine as a node: usable memory from cgroup limits and /proc/meminfo.
Node local_node(int32_t threads);

// The plan as a table, one row per node.
std::string render(const Plan& plan);

}  // namespace strata::plan
