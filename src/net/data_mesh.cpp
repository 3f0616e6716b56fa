#include "net/data_mesh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <array>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "base/system.h"
#include "tensor/decode_rates.h"

namespace strata::net {
namespace {

// The numeric form accept() reports, an IPv4-mapped IPv6 address as plain IPv4.
std::string numeric(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "";
  std::string out = host;
  if (out.rfind("::ffff:", 0) == 0 && out.find('.') != std::string::npos) out = out.substr(7);
  return out;
}


using Clock = std::chrono::steady_clock;
// 16 bytes; 2: frames carry their send time; 3: frames are exchanges or messages
constexpr std::string_view kMagic = "STRATA-MESH/3\n\0\0";
constexpr size_t kNonce = 32, kMac = 32;

struct Hello {  // what the connecting member sends first
  std::array<char, 16> magic{};
  std::array<uint8_t, 32> session{};  // SHA-256 of the session id
  uint32_t from = 0, to = 0;
  std::array<uint8_t, kNonce> nonce{};
};
static_assert(sizeof(Hello) == 16 + 32 + 8 + kNonce);

enum FrameKind : uint32_t { kExchangeFrame = 1, kMessageFrame = 2 };
struct FrameHeader {
  uint32_t kind;
  uint32_t sequence;  // an exchange's number
  uint64_t count;     // an exchange's floats, a message's bytes
};
static_assert(sizeof(FrameHeader) == 16);
// What an exchange keeps of a message that came in its place: a member's report that its step ended.
constexpr uint64_t kMaxEarlyMessage = 64 << 10;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, left));
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int buf = 4 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

// Moves exactly n bytes (reading when `in`), polling until the deadline. False on EOF, error or time.
bool move_all(int fd, void* data, size_t n, bool in, Clock::time_point deadline, std::string& why) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t k = in ? ::recv(fd, p, n, 0) : ::send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k, n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0 && in) return why = "connection closed", false;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return why = std::strerror(errno), false;
    pollfd pfd{fd, static_cast<short>(in ? POLLIN : POLLOUT), 0};
    const int left = remaining_ms(deadline);
    if (left == 0 || ::poll(&pfd, 1, left) == 0) return why = "timed out", false;
  }
  return true;
}

std::array<uint8_t, 32> sha256(const std::string& s) {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  EVP_Digest(s.data(), s.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

// HMAC(key, role | from | to | nonce_c | nonce_a): what each side proves.
std::array<uint8_t, kMac> proof(const std::string& key, char role, const Hello& h, const uint8_t* nonce_a) {
  std::string msg(1, role);
  msg.append(reinterpret_cast<const char*>(&h.from), 8);
  msg.append(reinterpret_cast<const char*>(h.nonce.data()), kNonce);
  msg.append(reinterpret_cast<const char*>(nonce_a), kNonce);
  std::array<uint8_t, kMac> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const uint8_t*>(msg.data()),
       msg.size(), out.data(), &len);
  return out;
}

Result<int> dial(const std::string& endpoint, Clock::time_point deadline) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return make_error("data link endpoint '{}' has no port", endpoint);
  std::string host = endpoint.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), endpoint.c_str() + colon + 1, &hints, &res) != 0 || !res) {
    return make_error("data link endpoint '{}' does not resolve", endpoint);
  }
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ::freeaddrinfo(res);
    return make_error(ErrorCode::kUnavailable, "data link to {}: {}", endpoint, std::strerror(errno));
  }
  set_nonblocking(fd);
  const int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (rc != 0 && errno != EINPROGRESS) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return make_error(ErrorCode::kUnavailable, "data link to {}: {}", endpoint, why);
  }
  pollfd pfd{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof err;
  if (::poll(&pfd, 1, remaining_ms(deadline)) != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err) {
    ::close(fd);
    return make_error(ErrorCode::kUnavailable, "data link to {}: {}", endpoint, err ? std::strerror(err) : "timed out");
  }
  tune(fd);
  return fd;
}

// The connecting side of the handshake; the socket on success.
Result<int> connect_link(const MeshMember& peer, const Hello& hello, const std::string& key, Clock::time_point deadline) {
  STRATA_ASSIGN(const int fd, dial(peer.endpoint, deadline));
  std::string why;
  std::array<uint8_t, kNonce + kMac> reply{};
  bool ok = move_all(fd, const_cast<Hello*>(&hello), sizeof hello, false, deadline, why) &&
            move_all(fd, reply.data(), reply.size(), true, deadline, why);
  if (ok) {
    const auto want = proof(key, 'A', hello, reply.data());
    ok = CRYPTO_memcmp(want.data(), reply.data() + kNonce, kMac) == 0;
    if (!ok) why = "it does not hold this load's link key";
  }
  if (ok) {
    auto mine = proof(key, 'C', hello, reply.data());
    ok = move_all(fd, mine.data(), mine.size(), false, deadline, why);
  }
  if (!ok) {
    ::close(fd);
    return make_error(ErrorCode::kPermissionDenied, "data link to {}: {}", peer.name, why);
  }
  return fd;
}

// The accepting side: the peer's index, or an error (the connection is then dropped).
Result<uint32_t> accept_link(int fd, int32_t self, const std::array<uint8_t, 32>& session, const std::string& key,
                             Clock::time_point deadline) {
  std::string why;
  Hello h;
  if (!move_all(fd, &h, sizeof h, true, deadline, why)) return make_error("{}", why);
  if (std::memcmp(h.magic.data(), kMagic.data(), h.magic.size()) != 0) return make_error("not a Strata data link");
  if (h.session != session) return make_error("a link for another session");
  if (h.to != static_cast<uint32_t>(self) || h.from >= h.to) return make_error("link {} -> {} is not for member {}", h.from, h.to, self);
  std::array<uint8_t, kNonce + kMac> reply{};
  RAND_bytes(reply.data(), kNonce);
  const auto mine = proof(key, 'A', h, reply.data());
  std::memcpy(reply.data() + kNonce, mine.data(), kMac);
  std::array<uint8_t, kMac> theirs{};
  if (!move_all(fd, reply.data(), reply.size(), false, deadline, why) ||
      !move_all(fd, theirs.data(), theirs.size(), true, deadline, why)) {
    return make_error("{}", why);
  }
  const auto want = proof(key, 'C', h, reply.data());
  if (CRYPTO_memcmp(want.data(), theirs.data(), kMac) != 0) return make_error("the peer does not hold this load's link key");
  return h.from;
}

// Accepts the earlier members' links (fds[i] for member i < self) until all are in or the deadline.
// Each connection is handshaken on a thread of its own with a short budget, so connections that
// open and stall (nobody's link) cannot keep the members out: at most kMaxPending wait at once and
// newer ones are closed, and those still waiting when the links are in are shut down.
struct AcceptResult {
  int32_t accepted = 0;
  std::string last_refusal;
};

AcceptResult accept_links(const MeshListener& listener, int32_t self, const std::array<uint8_t, 32>& session,
                          const std::string& key, Clock::time_point deadline, std::vector<int>& fds) {
  constexpr size_t kMaxPending = 64;
  constexpr auto kHandshakeBudget = std::chrono::milliseconds(1000);
  std::mutex mu;
  AcceptResult r;
  std::vector<int> pending;  // fds being handshaken
  std::vector<std::thread> threads;
  int64_t foreign = 0;  // connections from other hosts, logged once
  auto finish = [&](int fd, Result<uint32_t> from) {
    std::lock_guard lock(mu);
    std::erase(pending, fd);
    if (from.ok() && *from < fds.size() && fds[*from] == -1) {
      fds[*from] = fd;
      ++r.accepted;
      return;
    }
    r.last_refusal = from.ok() ? "a second link from the same member" : from.error().message;
    spdlog::warn("data link: refused a connection: {}", r.last_refusal);
    ::close(fd);
  };
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (r.accepted >= self) break;
    }
    pollfd pfd{listener.fd(), POLLIN, 0};
    const int left = remaining_ms(deadline);
    if (left == 0) break;
    if (::poll(&pfd, 1, std::min(left, 20)) != 1) continue;  // wakes now and then to see the links in
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    const int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    if (const std::string from = numeric(reinterpret_cast<sockaddr*>(&peer), peer_len); !listener.allows(from)) {
      if (++foreign == 1) spdlog::warn("data link: closed a connection from {}, not a member's host", from);
      ::close(fd);
      continue;
    }
    std::lock_guard lock(mu);
    if (pending.size() >= kMaxPending) {
      ::close(fd);
      continue;
    }
    tune(fd);
    pending.push_back(fd);
    const auto budget = std::min(deadline, Clock::now() + kHandshakeBudget);
    threads.emplace_back([&, fd, budget] { finish(fd, accept_link(fd, self, session, key, budget)); });
  }
  {
    std::lock_guard lock(mu);
    for (int fd : pending) ::shutdown(fd, SHUT_RDWR);  // their handshakes end at once, refused
  }
  for (auto& t : threads) t.join();
  return r;
}

}  // namespace

MeshListener::~MeshListener() { ::close(fd_); }

Status MeshListener::allow_only(const std::vector<std::string>& hosts) {
  std::vector<std::string> allowed;
  for (const std::string& host : hosts) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (host.empty() || host.size() > 255 || ::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) {
      return make_error("data link: cannot resolve mesh member host '{}'", host.substr(0, 64));
    }
    for (addrinfo* a = res; a; a = a->ai_next) allowed.push_back(numeric(a->ai_addr, a->ai_addrlen));
    ::freeaddrinfo(res);
  }
  allowed_ = std::move(allowed);
  return {};
}

bool MeshListener::allows(const std::string& address) const {
  return allowed_.empty() || std::find(allowed_.begin(), allowed_.end(), address) != allowed_.end();
}

std::string grpc_peer_address(const std::string& peer) {
  std::string rest;
  if (peer.rfind("ipv4:", 0) == 0 || peer.rfind("ipv6:", 0) == 0) rest = peer.substr(5);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return "";
  rest = rest.substr(0, colon);
  for (const char* bracket : {"%5B", "%5b", "["}) {
    if (rest.rfind(bracket, 0) == 0) rest = rest.substr(std::strlen(bracket));
  }
  for (const char* bracket : {"%5D", "%5d", "]"}) {
    const size_t n = std::strlen(bracket);
    if (rest.size() >= n && rest.compare(rest.size() - n, n, bracket) == 0) rest.resize(rest.size() - n);
  }
  if (rest.rfind("::ffff:", 0) == 0 && rest.find('.') != std::string::npos) rest = rest.substr(7);
  return rest;
}

Result<std::unique_ptr<MeshListener>> MeshListener::open(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const char* node = host.empty() || host == "0.0.0.0" ? nullptr : host.c_str();
  if (::getaddrinfo(node, "0", &hints, &res) != 0 || !res) return make_error("data link: cannot listen on '{}'", host);
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // A long queue: idle connections must not fill it before the members' own arrive.
  const bool ok = fd >= 0 && ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0;
  ::freeaddrinfo(res);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (!ok || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return make_error("data link: cannot listen on '{}': {}", host, why);
  }
  const int port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                              : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  set_nonblocking(fd);
  return std::unique_ptr<MeshListener>(new MeshListener(fd, port));
}

std::string random_secret() {
  std::string s(32, '\0');
  RAND_bytes(reinterpret_cast<uint8_t*>(s.data()), static_cast<int>(s.size()));
  return s;
}

std::string link_key(const std::string& token, const std::string& secret) {
  const std::string msg = "strata mesh" + secret;
  std::string out(32, '\0');
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), reinterpret_cast<const uint8_t*>(msg.data()),
       msg.size(), reinterpret_cast<uint8_t*>(out.data()), &len);
  return out;
}

bool DataMesh::spins(int32_t threads, double quota_cores) { return quota_cores <= 0 || quota_cores >= threads; }

Result<std::unique_ptr<DataMesh>> DataMesh::join(int32_t self, const std::vector<MeshMember>& members,
                                                 MeshListener* listener, const std::string& key,
                                                 const std::string& session, int32_t timeout_ms, int32_t threads) {
  const int32_t n = static_cast<int32_t>(members.size());
  if (n < 2 || n > 64 || self < 0 || self >= n) return make_error("data mesh: member {} of {}", self, n);
  if (self > 0 && !listener) return make_error("data mesh: member {} has no listener", self);
  auto mesh = std::unique_ptr<DataMesh>(new DataMesh());
  mesh->self_ = self;
  mesh->timeout_ms_ = timeout_ms;
  if (const double quota = cpu_quota_cores(); !spins(threads, quota)) {
    mesh->spin_us_ = mesh->message_spin_us_ = 0;
    spdlog::info("tensor split: waits for peers sleep at once: this process may use {:.2f} cores for {} threads, and a "
                 "spinning wait would spend the CPU time its products need",
                 quota, threads);
  }
  if (const char* w = std::getenv("STRATA_LINK_SPIN_US")) mesh->spin_us_ = std::clamp(std::atoi(w), 0, 100000);
  mesh->fds_.assign(n, -1);
  mesh->early_.assign(n, {});
  for (const MeshMember& m : members) mesh->names_.push_back(m.name);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const auto session_hash = sha256(session);

  // Later members: connect (on a thread, while this one accepts the earlier members' links).
  Status connected;
  std::thread dialer([&] {
    for (int32_t j = self + 1; j < n && connected.ok(); ++j) {
      Hello h;
      std::memcpy(h.magic.data(), kMagic.data(), h.magic.size());
      h.session = session_hash;
      h.from = static_cast<uint32_t>(self), h.to = static_cast<uint32_t>(j);
      RAND_bytes(h.nonce.data(), kNonce);
      auto fd = connect_link(members[j], h, key, deadline);
      if (!fd.ok()) connected = fd.error();
      else mesh->fds_[j] = *fd;
    }
  });
  // Member 0 accepts nothing and may have no listener.
  const AcceptResult got = self > 0 ? accept_links(*listener, self, session_hash, key, deadline, mesh->fds_) : AcceptResult{};
  const int32_t accepted = got.accepted;
  const std::string& last_refusal = got.last_refusal;
  dialer.join();
  STRATA_TRY(connected);
  if (accepted < self) {
    std::string missing;
    for (int32_t i = 0; i < self; ++i) {
      if (mesh->fds_[i] == -1) missing += (missing.empty() ? "" : ", ") + members[i].name;
    }
    return make_error(ErrorCode::kDeadlineExceeded, "data mesh: no link from {} within {} ms{}", missing, timeout_ms,
                      last_refusal.empty() ? "" : " (last refusal: " + last_refusal + ")");
  }
  return mesh;
}

DataMesh::~DataMesh() {
  if (exchanges_ > 0) {
    const double span = std::chrono::duration<double>(last_ - first_).count();
    const double waited = static_cast<double>(wait_ns_) * 1e-9;
    spdlog::info("data links: member {} waited {:.1f} us per exchange on average over {} exchanges, {:.0f}% of its "
                 "{:.2f} s between the first and the last",
                 self_, waited * 1e6 / static_cast<double>(exchanges_), exchanges_, span > 0 ? 100 * waited / span : 0.0,
                 span);
  }
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

// The links stay open: a member that died closed its own, so the others see that at once and name
// it; closing ours too would make them blame this member instead.
void DataMesh::fail(Status s) {
  if (error_.ok()) error_ = std::move(s);
}

namespace {

struct LinkProgress {
  size_t sent = 0, got = 0;
  FrameHeader in{};
  bool early = false;  // a message came instead of the peer's frame
};

// Moves what one link takes of this member's frame (out, then data) and what has come of the
// peer's (into q.in, then `into`), without blocking.
Status pump(int fd, const std::string& peer, LinkProgress& q, const FrameHeader& out, const float* data,
            std::vector<float>& into) {
  const size_t total = sizeof out + out.count * sizeof(float);
  while (q.sent < total) {
    const uint8_t* src = q.sent < sizeof out ? reinterpret_cast<const uint8_t*>(&out) + q.sent
                                             : reinterpret_cast<const uint8_t*>(data) + (q.sent - sizeof out);
    const size_t len = q.sent < sizeof out ? sizeof out - q.sent : total - q.sent;
    const ssize_t k = ::send(fd, src, len, MSG_NOSIGNAL);
    if (k > 0) { q.sent += static_cast<size_t>(k); continue; }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    return make_error(ErrorCode::kUnavailable, "tensor split: link to {}: {}", peer, std::strerror(errno));
  }
  while (q.got < total) {
    if (q.got == sizeof out) {
      if (q.in.kind == kMessageFrame) {
        q.early = true;
        return make_error(ErrorCode::kUnavailable, "tensor split: {} ended its step before exchange {}", peer,
                          out.sequence);
      }
      if (q.in.kind != kExchangeFrame || q.in.sequence != out.sequence || q.in.count != out.count) {
        return make_error(ErrorCode::kInternal, "tensor split: {} sent exchange {} of {} floats, expected {} of {}", peer,
                          q.in.sequence, q.in.count, out.sequence, out.count);
      }
      into.resize(out.count);
    }
    uint8_t* dst = q.got < sizeof out ? reinterpret_cast<uint8_t*>(&q.in) + q.got
                                      : reinterpret_cast<uint8_t*>(into.data()) + (q.got - sizeof out);
    const size_t len = q.got < sizeof out ? sizeof out - q.got : total - q.got;
    const ssize_t k = ::recv(fd, dst, len, 0);
    if (k > 0) { q.got += static_cast<size_t>(k); continue; }
    if (k == 0) return make_error(ErrorCode::kUnavailable, "tensor split: {} closed its link", peer);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
    return make_error(ErrorCode::kUnavailable, "tensor split: link to {}: {}", peer, std::strerror(errno));
  }
  return {};
}

}  // namespace

// Sends this member's n floats to every peer and reads theirs, all links at once (a large batch
// would fill both directions' buffers if each link were written before being read).
Status DataMesh::exchange(const float* data, int64_t n, model::IdleWork* idle) {
  const auto start = Clock::now();
  const FrameHeader header{kExchangeFrame, sequence_++, static_cast<uint64_t>(n)};
  std::vector<LinkProgress> p(size());
  received_.resize(size());
  const size_t total = sizeof header + static_cast<size_t>(n) * sizeof(float);
  const auto deadline = start + std::chrono::milliseconds(timeout_ms_);
  const auto spin_until = start + std::chrono::microseconds(spin_us_);
  std::vector<pollfd> fds;
  std::vector<int32_t> who;
  for (;;) {
    fds.clear(), who.clear();
    for (int32_t m = 0; m < size(); ++m) {
      if (m == self_) continue;
      LinkProgress& q = p[m];
      if (Status s = pump(fds_[m], names_[m], q, header, data, received_[m]); !s.ok()) {
        if (q.early) keep_early_message(m, q.in.count, deadline);
        return s;
      }
      if (q.sent < total || q.got < total) {
        fds.push_back({fds_[m], static_cast<short>((q.sent < total ? POLLOUT : 0) | (q.got < total ? POLLIN : 0)), 0});
        who.push_back(m);
      }
    }
    if (fds.empty()) return {};
    if (idle && Clock::now() < deadline && idle->step()) continue;  // warm the next weights rather than spin
    // The peers are usually a few microseconds away: retry at once for a while (yielding the core to
    // anyone who wants it) rather than sleep in poll, whose wake-up costs tens of microseconds.
    if (Clock::now() < spin_until) {
      std::this_thread::yield();
      continue;
    }
    const int left = remaining_ms(deadline);
    if (left == 0 || ::poll(fds.data(), fds.size(), left) == 0) {
      return make_error(ErrorCode::kDeadlineExceeded, "tensor split: {} sent nothing for {} ms", names_[who[0]], timeout_ms_);
    }
  }
}

// The peer's message is its own report of why it stopped: kept (when small) for receive_message.
void DataMesh::keep_early_message(int32_t from, uint64_t bytes, Clock::time_point deadline) {
  if (bytes > kMaxEarlyMessage) return;
  std::string message(bytes, '\0');
  std::string why;
  if (move_all(fds_[from], message.data(), message.size(), true, deadline, why)) early_[from] = std::move(message);
}

Error DataMesh::failed(Error e) {
  fail(e);
  return error_.error();
}

Status DataMesh::send_message(int32_t to, std::string_view bytes) {
  if (!error_.ok()) return error_;
  if (to < 0 || to >= size() || to == self_) return make_error("data mesh: no link to member {}", to);
  const auto start = Clock::now();
  const FrameHeader header{kMessageFrame, 0, bytes.size()};
  const auto deadline = start + std::chrono::milliseconds(timeout_ms_);
  std::string why;
  if (!move_all(fds_[to], const_cast<FrameHeader*>(&header), sizeof header, false, deadline, why) ||
      !move_all(fds_[to], const_cast<char*>(bytes.data()), bytes.size(), false, deadline, why)) {
    return failed(make_error(ErrorCode::kUnavailable, "tensor split: link to {}: {}", names_[to], why));
  }
  return {};
}

// Until a frame starts to arrive from `from`: spinning for a while (a core that sleeps wakes up late
// on a VM), then in poll slices short enough to notice `stop`.
Status DataMesh::await_frame(int32_t from, const std::atomic<bool>* stop) {
  const auto start = Clock::now();
  const auto spin_until = start + std::chrono::microseconds(message_spin_us_);
  const auto deadline = start + std::chrono::milliseconds(timeout_ms_);
  for (;;) {
    uint8_t byte;
    const ssize_t k = ::recv(fds_[from], &byte, 1, MSG_PEEK);
    if (k > 0) return {};
    if (k == 0) return failed(make_error(ErrorCode::kUnavailable, "tensor split: {} closed its link", names_[from]));
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return failed(
          make_error(ErrorCode::kUnavailable, "tensor split: link to {}: {}", names_[from], std::strerror(errno)));
    }
    if (stop && stop->load()) return make_error("tensor split: stopped waiting for {}", names_[from]);
    if (Clock::now() < spin_until) {
      std::this_thread::yield();
      continue;
    }
    const int left = stop ? 100 : std::min(100, remaining_ms(deadline));
    if (left == 0) {
      return failed(make_error(ErrorCode::kDeadlineExceeded, "tensor split: {} sent nothing for {} ms", names_[from],
                               timeout_ms_));
    }
    pollfd pfd{fds_[from], POLLIN, 0};
    ::poll(&pfd, 1, left);
  }
}

Result<std::string> DataMesh::receive_message(int32_t from, size_t max_bytes, const std::atomic<bool>* stop) {
  if (from >= 0 && from < size() && !early_[from].empty()) return std::exchange(early_[from], std::string());
  if (!error_.ok()) return error_.error();
  if (from < 0 || from >= size() || from == self_) return make_error("data mesh: no link from member {}", from);
  STRATA_TRY(await_frame(from, stop));
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  FrameHeader header{};
  std::string why, bytes;
  if (move_all(fds_[from], &header, sizeof header, true, deadline, why)) {
    if (header.kind != kMessageFrame) {
      why = fmt::format("sent exchange {} where a message was due", header.sequence);
    } else if (header.count > max_bytes) {
      why = fmt::format("sent a message of {} bytes, more than the {} expected", header.count, max_bytes);
    } else {
      bytes.resize(header.count);
      if (move_all(fds_[from], bytes.data(), bytes.size(), true, deadline, why)) why.clear();
    }
  }
  if (!why.empty()) return failed(make_error(ErrorCode::kUnavailable, "tensor split: {}: {}", names_[from], why));
  return bytes;
}

void DataMesh::all_reduce_sum(float* data, int64_t n, model::IdleWork* idle) {
  if (!error_.ok() || n <= 0) return;
  if (n > (int64_t{1} << 28)) return fail(make_error("tensor split: an exchange of {} floats is too large", n));
  const auto start = Clock::now();
  if (Status s = exchange(data, n, idle); !s.ok()) return fail(std::move(s));
  last_ = Clock::now();
  if (exchanges_++ == 0) first_ = start;
  wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(last_ - start).count();
  tensor::record_exchange_wait(std::chrono::duration<double>(last_ - start).count());
  // Member order, on every member: ((m0 + m1) + m2) + ...
  sum_.assign(n, 0.0f);
  const float* first = self_ == 0 ? data : received_[0].data();
  std::copy(first, first + n, sum_.begin());
  for (int32_t m = 1; m < size(); ++m) {
    const float* src = m == self_ ? data : received_[m].data();
    for (int64_t i = 0; i < n; ++i) sum_[i] += src[i];
  }
  std::copy(sum_.begin(), sum_.end(), data);
}

}  // namespace strata::net
