// A link's failures carry error codes from the gRPC status: nothing listening is kUnavailable, a
// peer that never answers is kDeadlineExceeded (the server and the CLI act on those, not the text).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "net/remote_node.h"

namespace strata::net {
namespace {

// A loopback TCP socket bound to a free port; listening (accepting connections that nobody
// serves) or not, as asked.
class LoopbackPort {
 public:
  explicit LoopbackPort(bool listen) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || (listen && ::listen(fd_, 8) != 0)) {
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~LoopbackPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  LoopbackPort(const LoopbackPort&) = delete;
  LoopbackPort& operator=(const LoopbackPort&) = delete;
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  bool ok() const { return port_ > 0; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(RemoteNode, nothing_listening_is_unavailable) {
  LoopbackPort port(/*listen=*/false);  // bound, not listening: connections are refused
  ASSERT_TRUE(port.ok());
  auto link = RemoteNode::connect(port.endpoint(), {}, 2000);
  ASSERT_TRUE(link.ok()) << link.error().message;
  auto facts = (*link)->hello();
  ASSERT_FALSE(facts.ok());
  EXPECT_EQ(facts.error().code, ErrorCode::kUnavailable) << error_code_name(facts.error().code);
  EXPECT_NE(facts.error().message.find("worker " + port.endpoint() + ": Hello (unreachable)"), std::string::npos)
      << facts.error().message;
}

TEST(RemoteNode, a_peer_that_never_answers_runs_into_the_deadline) {
  LoopbackPort port(/*listen=*/true);  // the kernel accepts; nobody speaks HTTP/2
  ASSERT_TRUE(port.ok());
  auto link = RemoteNode::connect(port.endpoint(), {}, 300);
  ASSERT_TRUE(link.ok()) << link.error().message;
  auto facts = (*link)->hello();
  ASSERT_FALSE(facts.ok());
  // Depending on when gRPC gives up on the handshake, either is "the worker is not there".
  EXPECT_TRUE(facts.error().code == ErrorCode::kDeadlineExceeded || facts.error().code == ErrorCode::kUnavailable)
      << error_code_name(facts.error().code) << ": " << facts.error().message;
}

}  // namespace
}  // namespace strata::net
