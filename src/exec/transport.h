// What the runtime reaches other machines through, given to it by whoever builds the engine: the
// CLI and the server give net::grpc_transport (gRPC calls, TCP data links), tests give doubles. No
// transport type reaches the runtime, so a new transport changes neither it nor the plan.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "exec/stage_executor.h"
#include "model/collective.h"

namespace strata::exec {

// A member of a tensor group's data links: a name for errors and its data endpoint (host:port; empty
// for the member nobody connects to, this machine).
struct LinkMember {
  std::string name;
  std::string endpoint;
};

// Joins this machine to its tensor group's data links as member 0; every end proves the load's
// secret (and the transport's own credentials) within timeout_ms. `threads`: this machine's compute
// threads in the plan (how it waits for its peers may depend on them).
using LinkJoiner = std::function<Result<std::unique_ptr<model::Collective>>(
    const std::vector<LinkMember>& members, const std::string& secret, const std::string& session, int32_t timeout_ms,
    int32_t threads)>;

struct Transport {
  Connector connect;                        // opens a worker's executor
  LinkJoiner join_links;                    // -sm tensor: this machine's end of the group's links
  std::function<std::string()> new_secret;  // -sm tensor: a fresh random secret for one load's links
};

}  // namespace strata::exec
