#include "net/forward_stream.h"

#include <algorithm>

#include "net/credentials.h"

namespace strata::net {

grpc::Status send_forward(v1::Worker::Stub& stub, grpc::ClientContext& ctx, const v1::ForwardRequest& head,
                          std::string_view hidden, v1::ForwardReply* reply) {
  auto writer = stub.Forward(&ctx, reply);
  v1::ForwardRequest msg = head;
  size_t offset = 0;
  for (;;) {
    const size_t n = std::min(kChunkBytes, hidden.size() - offset);
    msg.set_hidden(hidden.data() + offset, n);
    offset += n;
    const bool last = offset == hidden.size();
    // The last message also half-closes the stream, in the same batch.
    if (!writer->Write(msg, last ? grpc::WriteOptions().set_last_message() : grpc::WriteOptions()) || last) break;
    msg.Clear();  // later messages carry only hidden state
  }
  return writer->Finish();
}

}  // namespace strata::net
