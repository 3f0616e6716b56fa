// The data links of a tensor group: one TCP connection between every two members, over which they
// add their partial sub-layer outputs (model::Collective), and over which a coordinator that is
// member 0 hands the others each batch and hears their logits (messages). The control plane (load,
// sequence operations, health) stays on gRPC; these links carry floats dozens of times per token,
// so they skip gRPC's framing and threads (bench/README.md, "Collectives for tensor parallelism",
// has the latencies that chose plain TCP over Gloo, UCX and MPI).
//
// A link is opened by the earlier member and proven both ways before it carries data: each side
// sends a fresh nonce and answers the other's with HMAC-SHA256 under the session's link key
// (link_key: the coordinator's random per-load secret, keyed with the cluster token), so only the
// nodes of this load can join. The floats themselves travel unencrypted: keep tensor groups on a
// private network. Every read is bounded by the expected size and every wait by the deadline.
//
// A LAN's latency and line rate for members on one machine: exec::emulate_links wraps the mesh.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/collective.h"

namespace strata::net {

// A member's listening socket for the links of the members before it (bound at load, port 0: the
// kernel picks one, reported to the coordinator).
class MeshListener {
 public:
  static Result<std::unique_ptr<MeshListener>> open(const std::string& host);
  ~MeshListener();
  MeshListener(const MeshListener&) = delete;
  MeshListener& operator=(const MeshListener&) = delete;
  int port() const { return port_; }
  int fd() const { return fd_; }
  // From the next join on, connections from other addresses are closed unread. `hosts` are names
  // or numeric addresses (each resolved here); empty: any address. An unresolvable name is an error.
  Status allow_only(const std::vector<std::string>& hosts);
  bool allows(const std::string& numeric_address) const;

 private:
  MeshListener(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
  std::vector<std::string> allowed_;  // numeric addresses; empty: any
};

// The numeric address of a gRPC peer string ("ipv4:10.0.0.2:5000", "ipv6:[::1]:5000"); empty when
// it is not an IP peer.
std::string grpc_peer_address(const std::string& peer);

// The key both ends of every link prove: HMAC-SHA256(token, "strata mesh" | secret), where secret is
// the coordinator's random bytes for this load (sent over the authenticated control plane).
std::string link_key(const std::string& token, const std::string& secret);
// 32 random bytes (OpenSSL's generator), for a load's secret.
std::string random_secret();

struct MeshMember {
  std::string name;      // for errors: "local", "W1 (host:port)"
  std::string endpoint;  // host:port of its data listener; empty for a member nobody connects to (the first)
};

class DataMesh final : public model::Collective {
 public:
  // STRATA_LINK_SPIN_US overrides it (bench/README.md has the figures that chose it).
  static constexpr int32_t kSpinUs = 2000;
  // How long a member waiting for a message (the next batch, a result) retries before it sleeps.
  static constexpr int32_t kMessageSpinUs = 5000;
  // Whether waits for peers spin before they sleep: not in a process held to a CPU quota below its
  // compute threads (`threads`), where every spinning microsecond is quota its products then lack.
  static bool spins(int32_t threads, double quota_cores);
  // Joins as member `self`: connects to every later member and accepts one link from every earlier
  // one on `listener` (null only for member 0), within timeout_ms. Connections that fail the
  // handshake are dropped and the wait goes on until the deadline. `threads`: the process's compute
  // threads (for spins).
  static Result<std::unique_ptr<DataMesh>> join(int32_t self, const std::vector<MeshMember>& members,
                                                MeshListener* listener, const std::string& key,
                                                const std::string& session, int32_t timeout_ms, int32_t threads);
  ~DataMesh() override;

  void all_reduce_sum(float* data, int64_t n, model::IdleWork* idle = nullptr) override;
  Status error() const override { return error_; }
  // A message that an exchange met in place of a peer's frame (that peer's report of why its step
  // ended) is kept and handed out by the next receive_message from it, even after the mesh failed.
  Status send_message(int32_t to, std::string_view bytes) override;
  Result<std::string> receive_message(int32_t from, size_t max_bytes, const std::atomic<bool>* stop = nullptr) override;
  int32_t self() const { return self_; }
  int32_t size() const { return static_cast<int32_t>(fds_.size()); }
  // A failed mesh stays failed: the coordinator recovers by loading the group anew.
  uint64_t exchanges() const { return exchanges_; }

 private:
  DataMesh() = default;
  Status exchange(const float* data, int64_t n, model::IdleWork* idle);
  void keep_early_message(int32_t from, uint64_t bytes, std::chrono::steady_clock::time_point deadline);
  Status await_frame(int32_t from, const std::atomic<bool>* stop);
  Error failed(Error e);  // fail(e), then the mesh's error
  void fail(Status s);

  int32_t self_ = 0;
  std::vector<int> fds_;  // per member; -1 for self
  std::vector<std::string> names_;
  std::vector<std::string> early_;  // per member: a message an exchange met (keep_early_message)
  int32_t timeout_ms_ = 30000;
  int32_t spin_us_ = kSpinUs;        // how long an exchange retries before it sleeps in poll
  int32_t message_spin_us_ = kMessageSpinUs;
  uint32_t sequence_ = 0;
  std::vector<std::vector<float>> received_;
  std::vector<float> sum_;
  Status error_;
  uint64_t exchanges_ = 0;
  // Where the time goes, logged when the mesh closes: time inside exchanges against the whole span.
  int64_t wait_ns_ = 0;
  std::chrono::steady_clock::time_point first_, last_;
};

}  // namespace strata::net
