// Worker calls on the wire. Every request is a client stream, read by the worker only after it has
// checked the token. A Forward's first message holds the hops and rows and each message carries at
// most kChunkBytes of hidden state, so that no message exceeds a worker's receive limit.
#pragma once

#include <string_view>

#include "strata.grpc.pb.h"

namespace strata::net {

// Any other call: its one request message, then the reply (see proto/strata.proto for why every
// request is a stream), e.g. call_one(&v1::Worker::Stub::Hello, stub, ctx, request, &reply).
template <typename Request, typename Reply>
grpc::Status call_one(std::unique_ptr<grpc::ClientWriter<Request>> (v1::Worker::Stub::*method)(grpc::ClientContext*,
                                                                                              Reply*),
                      v1::Worker::Stub& stub, grpc::ClientContext& ctx, const Request& request, Reply* reply) {
  auto writer = (stub.*method)(&ctx, reply);
  writer->Write(request, grpc::WriteOptions().set_last_message());
  return writer->Finish();
}

// The worker side: the call's one request message; false when the stream has none or more.
template <typename Request>
bool read_one(grpc::ServerReader<Request>& reader, Request& request) {
  Request extra;
  return reader.Read(&request) && !reader.Read(&extra);
}

// Sends `head` (everything but the hidden state) and `hidden` as one Forward call.
grpc::Status send_forward(v1::Worker::Stub& stub, grpc::ClientContext& ctx, const v1::ForwardRequest& head,
                          std::string_view hidden, v1::ForwardReply* reply);

}  // namespace strata::net
