#include "runtime/tensor_group.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string_view>
#include <thread>

#include "model/shard.h"

namespace strata::runtime {
namespace {

// The host of a worker's host:port (brackets of an IPv6 address kept), for its data endpoint.
std::string host_of(const std::string& endpoint) { return endpoint.substr(0, endpoint.rfind(':')); }

}  // namespace

TensorGroup::~TensorGroup() {
  if (local_.loaded()) local_.runner().set_collective(nullptr);
}

Status TensorGroup::join(const exec::LinkJoiner& join_links, const std::string& secret, const std::string& session,
                         int32_t timeout_ms) {
  const std::vector<int32_t>& group = plan_.tensor_group;
  std::vector<std::string> endpoints;
  std::vector<exec::LinkMember> members;
  for (int32_t node : group) {
    std::string endpoint;
    if (node != 0) {
      const int32_t port = nodes_[node]->data_port();
      if (port <= 0) return make_error("worker {}: no data link port after its load", nodes_[node]->name());
      endpoint = fmt::format("{}:{}", host_of(plan_.nodes[node].endpoint), port);
    }
    endpoints.push_back(endpoint);
    members.push_back({node == 0 ? "local" : nodes_[node]->name(), endpoint});
  }
  if (local_.loaded()) local_.runner().set_collective(nullptr);
  mesh_.reset();
  // Led by this machine, the batches go to the members over the data links: a call per token costs
  // each side a thread's wake-up, dear on a VM (bench/README.md). STRATA_LINK_STEPS=off keeps the calls.
  const char* steps = std::getenv("STRATA_LINK_STEPS");
  steps_over_link_ = group.front() == 0 && !(steps && std::string_view(steps) == "off");
  // The members wait for each other's links, so every join runs at once.
  std::vector<Status> results(group.size());
  std::vector<std::thread> joins;
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] != 0) joins.emplace_back([&, i] { results[i] = nodes_[group[i]]->join_mesh(endpoints, steps_over_link_); });
  }
  if (group.front() == 0) {
    auto mesh = join_links(members, secret, session, timeout_ms, plan_.nodes[0].threads);
    if (mesh.ok()) mesh_ = std::move(*mesh);
    else results[0] = mesh.error();
  }
  for (auto& t : joins) t.join();
  for (size_t i = 0; i < group.size(); ++i) {
    if (!results[i].ok()) return make_error(results[i].error().code, "tensor group: {}", results[i].error().message);
  }
  if (mesh_) local_.runner().set_collective(mesh_.get());
  spdlog::info("tensor group: {} members linked; batches go to them {}", group.size(),
               steps_over_link_ ? "over the data links" : "by gRPC calls");
  return {};
}

Result<std::vector<float>> TensorGroup::run(const model::Batch& batch, const std::vector<float>& hidden, int32_t top_k) {
  const std::vector<int32_t>& group = plan_.tensor_group;
  const int32_t n_layer = static_cast<int32_t>(plan_.layer_owner.size());
  std::vector<Result<std::vector<float>>> out(group.size(), std::vector<float>{});
  inputs_.resize(group.size());
  if (steps_over_link_) {
    // Every member gets the batch before this machine starts its own slice; their logits follow
    // their last exchange on the same links.
    for (size_t i = 1; i < group.size(); ++i) {
      exec::StageExecutor& node = *nodes_[group[i]];
      const exec::Hop hop{&node, 0, n_layer, true, false};
      STRATA_TRY(node.send_batch_over_link(*mesh_, static_cast<int32_t>(i), hop, batch, hidden, top_k));
    }
    inputs_[0] = hidden;
    const exec::Hop hop{&local_, 0, n_layer, true, false};
    out[0] = local_.run({&hop, 1}, batch, inputs_[0], top_k);
    for (size_t i = 1; i < group.size(); ++i) {
      out[i] = nodes_[group[i]]->receive_logits_over_link(*mesh_, static_cast<int32_t>(i), batch, top_k);
    }
    return merge(out);
  }
  std::vector<std::thread> calls;
  for (size_t i = 0; i < group.size(); ++i) {
    inputs_[i] = hidden;  // each member's rows change in place
    exec::StageExecutor* node = nodes_[group[i]].get();
    if (node == &local_) continue;
    calls.emplace_back([&, i, node] {
      const exec::Hop hop{node, 0, n_layer, true, false};
      out[i] = node->run({&hop, 1}, batch, inputs_[i], top_k);
    });
  }
  if (group.front() == 0) {
    const exec::Hop hop{&local_, 0, n_layer, true, false};
    out[0] = local_.run({&hop, 1}, batch, inputs_[0], top_k);
  }
  for (auto& t : calls) t.join();
  return merge(out);
}

// The members' logits, each its vocabulary rows, as one; or the error that names the failure best:
// a member's own report first, then what this machine's links saw (the member whose link closed),
// then what the other members' links saw.
Result<std::vector<float>> TensorGroup::merge(std::vector<Result<std::vector<float>>>& out) const {
  const std::vector<int32_t>& group = plan_.tensor_group;
  const auto is_link_report = [](const Error& e) { return e.message.find("tensor split:") != std::string::npos; };
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < group.size(); ++i) {
      if (out[i].ok()) continue;
      const bool local = group[i] == 0, link = is_link_report(out[i].error());
      if ((pass == 0 && !local && !link) || (pass == 1 && local) || pass == 2) return std::move(out[i]).error();
    }
  }
  std::vector<float> logits;
  for (auto& o : out) model::merge_logits(logits, *o);
  return logits;
}

}  // namespace strata::runtime
