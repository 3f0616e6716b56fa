// Forward requests on the wire: a client stream whose first message holds the hops and rows and
// whose messages carry at most kChunkBytes of hidden state each, so that no message exceeds a
// worker's receive limit and the worker checks the token before it reads any of them.
#pragma once

#include <string_view>

#include "strata.grpc.pb.h"

namespace strata::net {

// Sends `head` (everything but the hidden state) and `hidden` as one Forward call.
grpc::Status send_forward(v1::Worker::Stub& stub, grpc::ClientContext& ctx, const v1::ForwardRequest& head,
                          std::string_view hidden, v1::ForwardReply* reply);

}  // namespace strata::net
