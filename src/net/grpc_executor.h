// Workers over gRPC as stage executors. This header carries no gRPC or protobuf types: the runtime
// opens executors through it and never sees the wire format.
#pragma once

#include <memory>
#include <string>

#include "exec/stage_executor.h"
#include "exec/transport.h"
#include "net/link_security.h"

namespace strata::net {

// Opens workers at host:port (lazily: the first call dials); every call has `timeout_ms`. The workers
// one connector opens share the model's hash and metadata image, computed once.
exec::Connector grpc_connector(const LinkSecurity& security, int32_t timeout_ms);
// Workers over gRPC, tensor-group links as DataMesh (TCP, keyed by the token and the load's secret).
exec::Transport grpc_transport(const LinkSecurity& security, int32_t timeout_ms);

}  // namespace strata::net
