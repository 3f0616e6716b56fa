// Workers over gRPC as stage executors. This header carries no gRPC or protobuf types: the runtime
// opens executors through it and never sees the wire format.
#pragma once

#include <memory>
#include <string>

#include "exec/stage_executor.h"
#include "net/link_security.h"

namespace strata::net {

// Connects (lazily: the first call dials) to the worker at host:port; every call has `timeout_ms`.
Result<std::unique_ptr<exec::StageExecutor>> connect_grpc_worker(const std::string& endpoint,
                                                                 const LinkSecurity& security, int32_t timeout_ms);
// The same, as the engine's connector.
exec::Connector grpc_connector(const LinkSecurity& security, int32_t timeout_ms);

}  // namespace strata::net
