#include "server/http_framing.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace strata::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kKeepAliveMaxRequests = 100000;

int ms_until(Clock::time_point t) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(d, 0, 1000));
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A complete HTTP/1.1 error response (OpenAI's error body, Connection: close): the last thing a refused
// connection is sent.
std::string http_error_response(int status, const char* reason, const std::string& message) {
  const std::string body = R"({"error":{"message":")" + message + R"(","type":"invalid_request_error"}})";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// What the head of a connection's buffer holds.
struct Framing {
  enum Kind { kIncomplete, kComplete, kRefused } kind = kIncomplete;
  size_t header_end = 0;   // offset just past the blank line
  size_t request_end = 0;  // kComplete: offset just past the body
  bool expects_continue = false;
  std::string refusal;     // kRefused: the response to send before closing
};

// Finds the end of the request at the head of `buf` from its Content-Length; refuses oversized
// headers or bodies and chunked request bodies (every API client sends a length).
Framing frame_request(const std::string& buf, const FramingLimits& limits) {
  Framing f;
  const size_t end = buf.find("\r\n\r\n");
  if (end == std::string::npos || end + 4 > limits.max_header_bytes) {
    if (buf.size() > limits.max_header_bytes) {
      f.kind = Framing::kRefused;
      f.refusal = http_error_response(431, "Request Header Fields Too Large", "the request headers are too large");
    }
    return f;
  }
  f.header_end = end + 4;
  uint64_t length = 0;
  bool has_length = false;
  for (size_t at = buf.find("\r\n") + 2; at < end;) {
    const size_t eol = buf.find("\r\n", at);
    const std::string_view line(buf.data() + at, eol - at);
    at = eol + 2;
    const size_t colon = line.find(':');
    // Folded lines and space before the colon are read differently by other parsers (request
    // smuggling behind a proxy): refused, as RFC 9112 allows.
    if (colon == std::string_view::npos || colon == 0 || line[0] == ' ' || line[0] == '\t' ||
        line[colon - 1] == ' ' || line[colon - 1] == '\t' || line.find('\n') != std::string_view::npos) {
      f.kind = Framing::kRefused;
      f.refusal = http_error_response(400, "Bad Request", "malformed header line");
      return f;
    }
    const std::string_view name = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      uint64_t v = 0;
      bool digits = !value.empty() && value.size() <= 18;
      for (char ch : value) digits = digits && ch >= '0' && ch <= '9', v = v * 10 + static_cast<uint64_t>(ch - '0');
      if (!digits || (has_length && v != length)) {
        f.kind = Framing::kRefused;
        f.refusal = http_error_response(400, "Bad Request", "malformed Content-Length");
        return f;
      }
      length = v, has_length = true;
    } else if (iequals(name, "transfer-encoding") && !iequals(value, "identity")) {
      f.kind = Framing::kRefused;
      f.refusal = http_error_response(411, "Length Required", "chunked request bodies are not accepted; send Content-Length");
      return f;
    } else if (iequals(name, "expect") && iequals(value, "100-continue")) {
      f.expects_continue = true;
    }
  }
  if (length > limits.max_body_bytes) {
    f.kind = Framing::kRefused;
    f.refusal = http_error_response(413, "Payload Too Large", "the request body is too large");
    return f;
  }
  if (buf.size() >= f.header_end + length) {
    f.kind = Framing::kComplete;
    f.request_end = f.header_end + length;
  }
  return f;
}

bool send_all(int fd, const char* p, size_t n, int timeout_ms) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w, n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      if (::poll(&pfd, 1, timeout_ms) > 0 && !(pfd.revents & (POLLERR | POLLHUP))) continue;
    }
    return false;
  }
  return true;
}

}  // namespace

struct FramingHttpServer::Connection {
  int fd = -1;
  std::string buf;          // received and not yet processed
  Clock::time_point deadline;
  bool started = false;     // the first byte of the next request has arrived
  bool continue_sent = false;
  bool keep = true;         // after serving: the connection stays open
  bool eof = false;         // the client has sent all it will (closed or half-closed)
  int requests = 0;
};

namespace {

constexpr size_t kTrimAfterBytes = size_t(1) << 20;

// glibc raises its mmap and trim thresholds to the largest block freed (up to 32 and 64 MiB), after
// which a long prompt's buffers stay in the heaps and a thread's heap top is never shrunk: fixed
// thresholds give blocks from 4 MiB back on free and shrink heaps with more than 256 KiB free at the
// top. Per-token buffers are smaller and stay in the heap. Every worker thread would also get an
// arena of its own (glibc allows 8 per core), each keeping the fragments of the largest request it
// served, so a long conversation's server grew with every new thread that answered it (figures in
// bench/README.md); four arenas bound it.
void fix_allocator_thresholds() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 10);
    mallopt(M_ARENA_MAX, 4);
  });
}

thread_local FramingHttpServer::Connection* current_connection = nullptr;

// httplib's view of a connection: reads come from the buffered request, writes go to the socket.
class FramedStream final : public httplib::Stream {
 public:
  FramedStream(FramingHttpServer::Connection& c, int write_timeout_ms) : c_(c), write_timeout_ms_(write_timeout_ms) {}
  size_t consumed() const { return pos_; }
  bool failed() const { return failed_; }

  bool is_readable() const override { return pos_ < c_.buf.size(); }
  bool is_writable() const override {
    pollfd pfd{c_.fd, POLLOUT, 0};
    return !failed_ && ::poll(&pfd, 1, write_timeout_ms_) > 0 && !(pfd.revents & (POLLERR | POLLHUP)) &&
           !FramingHttpServer::client_gone();
  }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, c_.buf.size() - pos_);
    std::memcpy(ptr, c_.buf.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (failed_ || !send_all(c_.fd, ptr, size, write_timeout_ms_)) {
      failed_ = true;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  socket_t socket() const override { return c_.fd; }

 private:
  void address(bool remote, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int r = remote ? ::getpeername(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len)
                         : ::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len);
    char host[NI_MAXHOST] = "", serv[NI_MAXSERV] = "0";
    if (r == 0) {
      ::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    }
    ip = host;
    port = std::atoi(serv);
  }

  FramingHttpServer::Connection& c_;
  int write_timeout_ms_;
  size_t pos_ = 0;
  bool failed_ = false;
};

bool is_health_request(const std::string& buf) {
  return buf.rfind("GET /health ", 0) == 0 || buf.rfind("GET /health?", 0) == 0;
}

}  // namespace

FramingHttpServer::FramingHttpServer(FramingLimits limits) : limits_(limits) { fix_allocator_thresholds(); }

FramingHttpServer::~FramingHttpServer() {
  stop();
  for (int fd : {listen_fd_, wake_fd_[0], wake_fd_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

Result<int> FramingHttpServer::bind(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    return make_error("cannot resolve '{}'", host);
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int one = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool bound = fd >= 0 && ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 && ::listen(fd, 512) == 0;
  ::freeaddrinfo(res);
  if (!bound) {
    if (fd >= 0) ::close(fd);
    return make_error("cannot listen on {}:{}: {}", host, port, std::strerror(errno));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  listen_fd_ = fd;
  svr_sock_ = fd;  // httplib's streamed responses run while this is a socket
  if (::pipe2(wake_fd_, O_CLOEXEC | O_NONBLOCK) != 0) return make_error("cannot create a pipe");
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

void FramingHttpServer::run() {
  for (int i = 0; i < limits_.worker_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  poller_ = std::thread([this] { poll_loop(); });
}

bool FramingHttpServer::client_gone() {
  const Connection* c = current_connection;
  if (!c) return false;
  pollfd pfd{c->fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&pfd, 1, 0) <= 0) return false;
  if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char byte;
  return ::recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void FramingHttpServer::wake() { (void)!::write(wake_fd_[1], "x", 1); }

void FramingHttpServer::close_connection(std::unique_ptr<Connection> c) {
  buffered_ -= c->buf.size();
  ::close(c->fd);
  --open_;
}

void FramingHttpServer::accept_ready() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (open_.load() >= limits_.max_connections) {
      const std::string busy = http_error_response(503, "Service Unavailable", "too many connections");
      (void)!::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ++open_;
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->deadline = Clock::now() + std::chrono::milliseconds(limits_.idle_timeout_ms);
    waiting_.push_back(std::move(c));
  }
}

bool FramingHttpServer::read_ready(Connection& c) {
  char chunk[16384];
  for (;;) {
    const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n == 0) {
      c.eof = true;  // a request already complete is still answered
      return !c.buf.empty();
    }
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (c.buf.size() + static_cast<size_t>(n) > limits_.max_header_bytes + limits_.max_body_bytes + (64 << 10)) {
      const std::string big = http_error_response(413, "Payload Too Large", "more request bytes than one request may have");
      send_all(c.fd, big.data(), big.size(), 100);
      return false;
    }
    if (buffered_.load() + static_cast<size_t>(n) > limits_.max_buffered_bytes) {
      const std::string busy = http_error_response(503, "Service Unavailable", "the server holds too many pending requests");
      send_all(c.fd, busy.data(), busy.size(), 100);
      return false;
    }
    if (!c.started) {
      c.started = true;
      c.deadline = Clock::now() + std::chrono::milliseconds(limits_.header_timeout_ms);
    }
    c.buf.append(chunk, static_cast<size_t>(n));
    buffered_ += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < sizeof chunk) return true;
  }
}

void FramingHttpServer::dispatch(std::unique_ptr<Connection> c) {
  if (is_health_request(c->buf)) {
    // Cheap, and must answer even when every worker is busy; a client that does not take the answer
    // at once is dropped rather than allowed to hold up the poll thread.
    serve(*c, 0);
    if (!c->keep) return close_connection(std::move(c));
    std::lock_guard lock(mu_);
    returned_.push_back(std::move(c));  // framed again next round: it may hold the next request
    wake();
    return;
  }
  {
    std::lock_guard lock(mu_);
    ready_.push_back(std::move(c));
  }
  cv_.notify_one();
}

void FramingHttpServer::poll_loop() {
  std::vector<pollfd> fds;
  while (!stopping_.load()) {
    fds.assign({{wake_fd_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}});
    int timeout = 1000;
    for (const auto& c : waiting_) {
      fds.push_back({c->fd, POLLIN, 0});
      timeout = std::min(timeout, ms_until(c->deadline));
    }
    ::poll(fds.data(), fds.size(), timeout);
    std::vector<std::unique_ptr<Connection>> waiting = std::move(waiting_);
    waiting_.clear();
    std::vector<bool> readable(waiting.size());
    for (size_t i = 0; i < waiting.size(); ++i) readable[i] = fds[i + 2].revents != 0;
    if (fds[0].revents) {
      char drain[64];
      while (::read(wake_fd_[0], drain, sizeof drain) > 0) {
      }
      std::lock_guard lock(mu_);
      for (auto& c : returned_) {
        c->started = !c->buf.empty();
        c->deadline = Clock::now() + std::chrono::milliseconds(c->started ? limits_.header_timeout_ms : limits_.idle_timeout_ms);
        waiting.push_back(std::move(c));
        readable.push_back(true);  // may already hold the next request
      }
      returned_.clear();
    }
    if (fds[1].revents) accept_ready();
    for (size_t i = 0; i < waiting.size(); ++i) {
      auto& c = waiting[i];
      if (readable[i] && !read_ready(*c)) {
        close_connection(std::move(c));
        continue;
      }
      const Framing f = readable[i] ? frame_request(c->buf, limits_) : Framing{};
      if (f.kind == Framing::kRefused) {
        send_all(c->fd, f.refusal.data(), f.refusal.size(), 100);
        close_connection(std::move(c));
      } else if (f.kind == Framing::kComplete) {
        dispatch(std::move(c));
      } else if (c->eof || Clock::now() >= c->deadline) {
        close_connection(std::move(c));  // gone with an incomplete request, too slow, or idle too long
      } else {
        if (f.expects_continue && !c->continue_sent && f.header_end > 0) {
          // The client waits for this before it sends the body we wait for.
          static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
          send_all(c->fd, kContinue, sizeof kContinue - 1, 100);
          c->continue_sent = true;
        }
        waiting_.push_back(std::move(c));
      }
    }
  }
  for (auto& c : waiting_) close_connection(std::move(c));
  waiting_.clear();
  std::lock_guard lock(mu_);
  for (auto& c : returned_) close_connection(std::move(c));
  returned_.clear();
}

void FramingHttpServer::serve(Connection& c, int write_timeout_ms) {
  FramedStream stream(c, write_timeout_ms);
  current_connection = &c;
  const bool last = stopping_.load() || ++c.requests >= kKeepAliveMaxRequests;
  bool closed = false;
  // Range requests are not served (a Range header with thousands of ranges would multiply a page);
  // a 100 Continue was already sent by the poll thread when one was asked for.
  const bool ok = process_request(stream, last, closed, [](httplib::Request& req) {
    req.ranges.clear();
    req.headers.erase("Expect");
  });
  current_connection = nullptr;
  buffered_ -= stream.consumed();
  {
    std::lock_guard lock(mu_);
    served_since_trim_ += stream.consumed();
  }
  c.buf.erase(0, stream.consumed());
  c.continue_sent = false;
  c.keep = ok && !closed && !last && !stream.failed() && !c.eof;
}

void FramingHttpServer::worker_loop() {
  for (;;) {
    std::unique_ptr<Connection> c;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_.load() || !ready_.empty(); });
      if (ready_.empty()) return;
      c = std::move(ready_.front());
      ready_.pop_front();
      active_.push_back(c.get());
    }
    try {
      serve(*c, limits_.write_timeout_ms);
    } catch (const std::exception& e) {
      spdlog::error("server: request failed: {}", e.what());
      c->keep = false;
    }
    bool trim = false;
    {
      std::lock_guard lock(mu_);
      active_.erase(std::find(active_.begin(), active_.end(), c.get()));
      if (c->keep && !stopping_.load()) {
        returned_.push_back(std::move(c));
        wake();
      } else {
        close_connection(std::move(c));
      }
      // A long prompt's body, rendering and tokens are freed when it ends, but the allocator keeps
      // the pages at the size of the largest request seen: give them back once nothing runs.
      if (active_.empty() && served_since_trim_ >= kTrimAfterBytes) {
        served_since_trim_ = 0;
        trim = true;
      }
      cv_.notify_all();
    }
    if (trim) malloc_trim(0);
  }
}

void FramingHttpServer::stop() {
  if (stopping_.exchange(true)) return;
  svr_sock_ = INVALID_SOCKET;  // ends streamed responses at their next chunk
  wake();
  if (poller_.joinable()) poller_.join();
  {
    std::unique_lock lock(mu_);
    for (auto& c : ready_) close_connection(std::move(c));
    ready_.clear();
    cv_.notify_all();
    const auto deadline = Clock::now() + std::chrono::milliseconds(limits_.shutdown_timeout_ms);
    if (!cv_.wait_until(lock, deadline, [&] { return active_.empty(); })) {
      spdlog::warn("server: {} request(s) still running after {} ms; closing their connections", active_.size(),
                   limits_.shutdown_timeout_ms);
      for (Connection* c : active_) ::shutdown(c->fd, SHUT_RDWR);
    }
  }
  for (auto& w : workers_) w.join();
  workers_.clear();
}

}  // namespace strata::server
