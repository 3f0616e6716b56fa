// Issue 10's worker items, each tried as an attacker would against a worker on loopback: bad
// positions, oversized and unauthenticated messages, size sums that wrap, broken uploads, session
// floods and forwards to endpoints outside the plan. The worker answers with an error status and
// keeps serving.
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "net/credentials.h"
#include "net/forward_stream.h"
#include "net/model_identity.h"
#include "net/remote_node.h"
#include "net/stage_spec.h"
#include "runtime/local_workers.h"
#include "testing/cluster.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

constexpr char kToken[] = "hardening-token";

// Peak resident memory of a process (VmHWM), bytes.
uint64_t peak_rss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

class WorkerHardening : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }
  void TearDown() override {
    worker_.stop();
    fs::remove_all(cache_);
  }
  void start(std::vector<std::string> extra) {
    worker_.stop();
    cache_ = (fs::temp_directory_path() / ("strata-hardening-" + std::to_string(::getpid()))).string();
    fs::remove_all(cache_);
    auto token = runtime::write_token_file(kToken);
    ASSERT_TRUE(token.ok());
    runtime::WorkerSpawn s;
    s.binary = testing::strata_binary();
    s.cache_dir = cache_;
    s.token_file = *token;
    s.extra_args = std::move(extra);
    auto w = runtime::WorkerProcess::spawn(s);
    ASSERT_TRUE(w.ok()) << w.error().message;
    worker_ = std::move(*w);
  }
  // A spec for the whole of stories260K on the worker (layers and output head).
  v1::StageSpec spec(const std::string& session) {
    const std::string path = testing::shared_file("models/stories260K.gguf");
    auto model = model::Model::open(path);
    EXPECT_TRUE(model.ok());
    model_ = *model;
    return testing::whole_model_spec(*model_, path, worker_.endpoint(), session);
  }
  std::unique_ptr<net::RemoteNode> link() {
    auto l = net::RemoteNode::connect(worker_.endpoint(), {kToken, "", "", ""}, 10000);
    EXPECT_TRUE(l.ok());
    return std::move(*l);
  }
  void load(const v1::StageSpec& s) {
    auto sent = link()->load(s, model_->file(), nullptr);
    ASSERT_TRUE(sent.ok()) << sent.error().message;
  }
  std::unique_ptr<v1::Worker::Stub> stub() { return v1::Worker::NewStub(*net::make_channel(worker_.endpoint(), {})); }
  void authorize(grpc::ClientContext& ctx, const std::string& token = kToken) {
    net::authorize(ctx, token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  }
  // A Forward of `rows` tokens of sequence 0 at positions first.. on session s.
  grpc::Status forward(const std::string& session, int rows, int first, bool again, const std::string& next = "") {
    v1::ForwardRequest head;
    head.mutable_hop()->set_session(session);
    head.mutable_hop()->set_first_layer(0);
    head.mutable_hop()->set_end_layer(1);
    head.mutable_hop()->set_again(again);
    if (!next.empty()) {
      head.add_next()->set_endpoint(next);
      head.mutable_next(0)->set_session(session);
    }
    for (int i = 0; i < rows; ++i) {
      head.add_pos(first + i);
      head.add_seq(0);
    }
    head.set_want_logits(std::string(rows, '\0'));
    const std::string hidden(rows * model_->hparams().n_embd * sizeof(float), '\0');
    grpc::ClientContext ctx;
    authorize(ctx);
    v1::ForwardReply reply;
    return net::send_forward(*stub(), ctx, head, hidden, &reply);
  }
  void expect_still_serving() {
    auto facts = link()->hello();
    EXPECT_TRUE(facts.ok()) << facts.error().message;
  }

  runtime::WorkerProcess worker_;
  std::string cache_;
  std::shared_ptr<const model::Model> model_;
};

TEST_F(WorkerHardening, item1_continued_hop_on_an_empty_sequence_is_refused) {
  const v1::StageSpec s = spec("positions");
  load(s);
  // `again` on a sequence that recorded nothing would make the expected position -1.
  grpc::Status st = forward("positions", 1, -1, true);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  st = forward("positions", 1, -5, false);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  // Proper use still works: a first hop, then the same rows again.
  st = forward("positions", 2, 0, false);
  EXPECT_TRUE(st.ok()) << st.error_message();
  st = forward("positions", 2, 0, true);
  EXPECT_TRUE(st.ok()) << st.error_message();
  st = forward("positions", 3, 0, true);  // more rows than were recorded
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  expect_still_serving();
}

TEST_F(WorkerHardening, item4_oversized_or_unauthenticated_messages_are_not_buffered) {
  const uint64_t before = peak_rss(worker_.pid());
  // A 64 MiB message sent as a unary call with a wrong token: refused before it is read (the
  // attacker's channel has no send limit of its own, so the refusal comes from the worker).
  grpc::ChannelArguments unlimited;
  unlimited.SetMaxSendMessageSize(-1);
  grpc::GenericStub generic(grpc::CreateCustomChannel(worker_.endpoint(), grpc::InsecureChannelCredentials(), unlimited));
  grpc::ClientContext ctx;
  authorize(ctx, "wrong-token");
  const std::string big(64 << 20, 'x');
  grpc::Slice slice(big);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::Status st;
  bool done = false;
  std::mutex mu;
  std::condition_variable cv;
  generic.UnaryCall(&ctx, "/strata.v1.Worker/Hello", grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    std::lock_guard lock(mu);
    st = s, done = true;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  // A streamed Forward of 64 MiB with a wrong token: refused before any message is read.
  v1::ForwardRequest head;
  head.mutable_hop()->set_session("s");
  head.add_pos(0);
  head.add_seq(0);
  grpc::ClientContext ctx2;
  authorize(ctx2, "wrong-token");
  v1::ForwardReply reply;
  st = net::send_forward(*stub(), ctx2, head, big, &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  const uint64_t after = peak_rss(worker_.pid());
  EXPECT_LT(after - before, uint64_t{32} << 20) << "the worker's peak memory grew by " << ((after - before) >> 20)
                                                  << " MiB for messages it refused";
  // With the token, a message over the receive limit is refused too.
  grpc::ClientContext ctx3;
  authorize(ctx3);
  v1::StageSpec huge_spec;
  huge_spec.set_metadata(std::string(16 << 20, 'x'));
  v1::PrepareReply prepared;
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto open_stub = v1::Worker::NewStub(grpc::CreateCustomChannel(worker_.endpoint(), grpc::InsecureChannelCredentials(), args));
  st = net::call_one(&v1::Worker::Stub::PrepareStage, *open_stub, ctx3, huge_spec, &prepared);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  expect_still_serving();
}

TEST_F(WorkerHardening, item5_stage_sizes_cannot_wrap_through_repeated_tensors) {
  v1::StageSpec s = spec("wrap");
  // One 2^52-byte tensor listed 4096 times would sum to 2^64, i.e. 0.
  v1::TensorSpec* huge = s.add_all_tensors();
  huge->set_name("huge.weight");
  huge->set_type(0);
  huge->add_ne(int64_t{1} << 25);
  huge->add_ne(int64_t{1} << 25);
  huge->set_nbytes(uint64_t{1} << 52);
  s.clear_stage_tensors();
  for (int i = 0; i < 4096; ++i) s.add_stage_tensors("huge.weight");
  grpc::ClientContext ctx;
  authorize(ctx);
  v1::PrepareReply reply;
  grpc::Status st = net::call_one(&v1::Worker::Stub::PrepareStage, *stub(), ctx, s, &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("listed twice"), std::string::npos) << st.error_message();
  // 4096 distinct tensors of 2^52 bytes: the sum saturates instead of wrapping to 0.
  s.clear_stage_tensors();
  for (int i = 0; i < 4096; ++i) {
    v1::TensorSpec* t = s.add_all_tensors();
    *t = *huge;
    t->set_name("huge." + std::to_string(i));
    s.add_stage_tensors(t->name());
  }
  grpc::ClientContext ctx3;
  authorize(ctx3);
  st = net::call_one(&v1::Worker::Stub::PrepareStage, *stub(), ctx3, s, &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  // Listed once, it is simply too big for this machine.
  s.clear_stage_tensors();
  s.add_stage_tensors("huge.weight");
  grpc::ClientContext ctx2;
  authorize(ctx2);
  st = net::call_one(&v1::Worker::Stub::PrepareStage, *stub(), ctx2, s, &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  expect_still_serving();
}

TEST_F(WorkerHardening, item6_an_interrupted_tensor_push_does_not_block_the_retry) {
  const v1::StageSpec s = spec("push");
  grpc::ClientContext prep;
  authorize(prep);
  v1::PrepareReply prepared;
  ASSERT_TRUE(net::call_one(&v1::Worker::Stub::PrepareStage, *stub(), prep, s, &prepared).ok());
  ASSERT_GT(prepared.missing_size(), 0);
  const gguf::TensorInfo* t = model_->file().find_tensor(prepared.missing(0));
  ASSERT_TRUE(t && t->nbytes > 2);
  const uint8_t* data = model_->file().tensor_data(*t);
  auto push = [&](uint64_t bytes) {
    grpc::ClientContext ctx;
    authorize(ctx);
    v1::PushReply reply;
    auto writer = stub()->PushTensors(&ctx, &reply);
    v1::TensorChunk chunk;
    chunk.set_session("push");
    chunk.set_name(t->name);
    chunk.set_offset(0);
    chunk.set_data(data, bytes);
    writer->Write(chunk);
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    return std::make_pair(st, reply.tensors_completed());
  };
  auto [first, done_first] = push(t->nbytes / 2);  // the stream ends half-way
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(done_first, 0);
  auto [retry, done_retry] = push(t->nbytes);  // a retry starts from offset 0
  EXPECT_TRUE(retry.ok()) << retry.error_message();
  EXPECT_EQ(done_retry, 1);
  expect_still_serving();
}

TEST_F(WorkerHardening, item12_sessions_are_bounded) {
  start({"--max-sessions", "2"});
  for (int i = 0; i < 3; ++i) {
    const v1::StageSpec s = spec("session-" + std::to_string(i));
    grpc::ClientContext ctx;
    authorize(ctx);
    v1::PrepareReply reply;
    grpc::Status st = net::call_one(&v1::Worker::Stub::PrepareStage, *stub(), ctx, s, &reply);
    if (i < 2) {
      EXPECT_TRUE(st.ok()) << st.error_message();
    } else {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    }
  }
  // Preparing an existing session again replaces it and is allowed.
  const v1::StageSpec again = spec("session-0");
  grpc::ClientContext ctx;
  authorize(ctx);
  v1::PrepareReply reply;
  EXPECT_TRUE(net::call_one(&v1::Worker::Stub::PrepareStage, *stub(), ctx, again, &reply).ok());
  expect_still_serving();
}

TEST_F(WorkerHardening, item13_forward_goes_only_to_the_workers_of_the_plan) {
  const v1::StageSpec s = spec("onward");
  ASSERT_EQ(s.forward_to_size(), 0);  // a one-worker plan: nowhere to forward to
  load(s);
  grpc::Status st = forward("onward", 1, 0, false, "127.0.0.1:1");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  expect_still_serving();
}

}  // namespace
}  // namespace strata
