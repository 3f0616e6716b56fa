// The call helpers on a worker service in this process (no port, no real worker): a Forward's hidden
// state goes in kChunkBytes messages with the head only in the first, and single-message calls are
// one message each way.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "net/credentials.h"
#include "net/forward_stream.h"

namespace strata::net {
namespace {

// Records what each Forward stream carried; Hello answers only a stream of exactly one message.
class RecordingWorker final : public v1::Worker::Service {
 public:
  grpc::Status Forward(grpc::ServerContext*, grpc::ServerReader<v1::ForwardRequest>* reader,
                       v1::ForwardReply* reply) override {
    messages.clear();
    v1::ForwardRequest msg;
    std::string hidden;
    while (reader->Read(&msg)) {
      messages.push_back(msg);
      hidden += msg.hidden();
    }
    reply->set_hidden(hidden);  // echoed, so the test compares the bytes that arrived
    return grpc::Status::OK;
  }

  grpc::Status Hello(grpc::ServerContext*, grpc::ServerReader<v1::HelloRequest>* reader,
                     v1::HelloReply* reply) override {
    v1::HelloRequest req;
    if (!read_one(*reader, req)) return {grpc::StatusCode::INVALID_ARGUMENT, "expected one request message"};
    reply->set_protocol(req.protocol() + 1);
    return grpc::Status::OK;
  }

  std::vector<v1::ForwardRequest> messages;
};

class ForwardStream : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
    builder.RegisterService(&worker_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxReplyBytes);
    stub_ = v1::Worker::NewStub(server_->InProcessChannel(args));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  v1::ForwardRequest head() const {
    v1::ForwardRequest h;
    h.mutable_hop()->set_first_layer(2);
    h.add_pos(7);
    h.add_seq(0);
    h.set_want_logits(std::string(1, '\1'));
    h.set_top_k(40);
    return h;
  }

  RecordingWorker worker_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Worker::Stub> stub_;
};

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 131 + i / 4096);
  return s;
}

TEST_F(ForwardStream, hidden_state_goes_in_chunks_with_the_head_first) {
  const std::string hidden = pattern(2 * kChunkBytes + 12345);
  grpc::ClientContext ctx;
  v1::ForwardReply reply;
  grpc::Status s = send_forward(*stub_, ctx, head(), hidden, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.hidden(), hidden);
  ASSERT_EQ(worker_.messages.size(), 3u);
  EXPECT_EQ(worker_.messages[0].hidden().size(), kChunkBytes);
  EXPECT_EQ(worker_.messages[1].hidden().size(), kChunkBytes);
  EXPECT_EQ(worker_.messages[2].hidden().size(), 12345u);
  // The head travels once: later messages carry only hidden state.
  v1::ForwardRequest first = worker_.messages[0];
  first.clear_hidden();
  EXPECT_EQ(first.SerializeAsString(), head().SerializeAsString());
  for (size_t i = 1; i < worker_.messages.size(); ++i) {
    v1::ForwardRequest rest = worker_.messages[i];
    rest.clear_hidden();
    EXPECT_EQ(rest.ByteSizeLong(), 0u) << "message " << i;
  }
  // Every message fits a worker's receive limit.
  for (const auto& m : worker_.messages) EXPECT_LE(m.ByteSizeLong(), static_cast<size_t>(kMaxRequestBytes));
}

TEST_F(ForwardStream, a_chunk_multiple_or_an_empty_hidden_state) {
  {
    const std::string hidden = pattern(kChunkBytes);
    grpc::ClientContext ctx;
    v1::ForwardReply reply;
    ASSERT_TRUE(send_forward(*stub_, ctx, head(), hidden, &reply).ok());
    EXPECT_EQ(worker_.messages.size(), 1u);  // no empty trailing message
    EXPECT_EQ(reply.hidden(), hidden);
  }
  grpc::ClientContext ctx;
  v1::ForwardReply reply;
  ASSERT_TRUE(send_forward(*stub_, ctx, head(), "", &reply).ok());
  ASSERT_EQ(worker_.messages.size(), 1u);  // the head alone
  EXPECT_EQ(worker_.messages[0].top_k(), 40u);
  EXPECT_TRUE(reply.hidden().empty());
}

TEST_F(ForwardStream, call_one_sends_one_message_and_read_one_wants_exactly_one) {
  v1::HelloRequest req;
  req.set_protocol(41);
  grpc::ClientContext ctx;
  v1::HelloReply reply;
  grpc::Status s = call_one(&v1::Worker::Stub::Hello, *stub_, ctx, req, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.protocol(), 42u);
  // Two messages, or none, are refused by read_one.
  for (int n : {0, 2}) {
    grpc::ClientContext c;
    v1::HelloReply r;
    auto writer = stub_->Hello(&c, &r);
    for (int i = 0; i < n; ++i) writer->Write(req);
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << n << " messages";
  }
}

}  // namespace
}  // namespace strata::net
