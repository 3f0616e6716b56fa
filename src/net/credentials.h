// Authentication and transport security for node links: a shared token (sent as a bearer token on
// every call) and optional TLS (mutual when both sides have certificates).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "base/result.h"
#include "net/link_security.h"

namespace strata::net {


Result<std::shared_ptr<grpc::ServerCredentials>> server_credentials(const LinkSecurity& s);
Result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const LinkSecurity& s);

// A channel to host:port with Strata's message limits and keepalive.
Result<std::shared_ptr<grpc::Channel>> make_channel(const std::string& endpoint, const LinkSecurity& s);

// Adds the bearer token to a client call.
void authorize(grpc::ClientContext& ctx, const std::string& token);
// Checks the bearer token of an incoming call (constant-time compare).
grpc::Status check_token(const grpc::ServerContext& ctx, const std::string& token);

// Loopback addresses may listen without a token.
bool is_loopback_host(const std::string& host);

// Largest message a worker accepts: unary requests are read whole before the handler runs (and
// before it can check the token), so they stay small; bulk data (tensors, hidden states) comes in
// streams of kChunkBytes messages, read only after the token check.
inline constexpr int kMaxRequestBytes = 8 << 20;
inline constexpr size_t kChunkBytes = 4 << 20;
// Largest reply a node accepts from a worker it called: logits of a full batch.
inline constexpr int kMaxReplyBytes = 1 << 30;

}  // namespace strata::net
