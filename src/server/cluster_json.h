// The plan and the cluster's state as JSON, for /props, /v1/cluster and the web page.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "server/scheduler.h"

namespace strata::server {

nlohmann::json cluster_json(const runtime::Engine& engine, const Scheduler& scheduler, const std::string& model_id);

}  // namespace strata::server
