// Nodes as the planner sees them, and what a plan says about one node.
#include <algorithm>

#include "base/system.h"
#include "plan/plan.h"
#include "tensor/repack.h"

namespace strata::plan {

std::vector<uint8_t> Plan::owned_by(int32_t node) const {
  std::vector<uint8_t> owned(layer_owner.size());
  for (size_t i = 0; i < layer_owner.size(); ++i) owned[i] = layer_owner[i] == node;
  return owned;
}

const std::vector<std::string>& Plan::tensors_on(int32_t node) const {
  static const std::vector<std::string> none;
  return node >= 0 && node < static_cast<int32_t>(node_stages.size()) ? node_stages[node].tensors : none;
}

bool Node::repacks() const {
  return std::find(cpu_features.begin(), cpu_features.end(), tensor::kRepackFeature) != cpu_features.end();
}

std::string Node::kernels_text() const {
  std::string text;
  for (const std::string& f : cpu_features) text += (text.empty() ? "" : " ") + f;
  return text.empty() ? "scalar" : text;
}

Node local_node(int32_t threads) {
  const MemoryFacts mem = read_memory_facts();
  Node n;
  n.name = "local";
  n.threads = threads;
  n.cpu_features = tensor::kernel_features();
  n.memory_usable = mem.available;
  n.memory_limit = mem.limit;
  return n;
}

Node worker_node(std::string endpoint, uint64_t memory_usable, int32_t threads, uint64_t memory_limit,
                 std::vector<std::string> cpu_features) {
  Node n;
  n.cpu_features = std::move(cpu_features);
  n.name = endpoint;
  n.endpoint = std::move(endpoint);
  n.memory_usable = memory_usable;
  n.memory_limit = memory_limit;
  n.threads = threads;
  return n;
}

}  // namespace strata::plan
