// The HTTP framing of `strata serve`: it accepts connections itself and reads every request whole
// (headers, then the body) on one poll thread, with a deadline and size limits, so a slow or idle
// client holds a file descriptor, never a worker thread. Complete requests go to httplib's request
// processing (routing, handlers, responses) on a pool of worker threads. /health is answered on the
// poll thread itself, so load balancers get an answer even while every worker streams.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"

namespace strata::server {

struct FramingLimits {
  int max_connections = 512;             // open client connections; more are refused with 503
  int header_timeout_ms = 10000;         // from a request's first byte to its last (headers and body)
  int idle_timeout_ms = 60000;           // a keep-alive connection without a request
  int write_timeout_ms = 30000;          // a response the client does not read
  size_t max_header_bytes = 64 << 10;    // request line and headers
  size_t max_body_bytes = 16 << 20;
  size_t max_buffered_bytes = 256 << 20; // request bytes held for all connections together
  int worker_threads = 32;               // requests processed at once (a streamed response holds one)
  int shutdown_timeout_ms = 5000;        // what stop() waits for running requests before cutting them off
};

class FramingHttpServer : public httplib::Server {
 public:
  explicit FramingHttpServer(FramingLimits limits);
  ~FramingHttpServer() override;

  // Binds the listening socket; port 0 picks a free one. Returns the port.
  Result<int> bind(const std::string& host, int port);
  // Serves until stop(); call from one thread.
  void run();
  // Stops accepting, closes idle connections, waits up to shutdown_timeout_ms for running requests,
  // then shuts the rest down. Returns once run() has returned and every worker has stopped.
  void stop();

  // In a handler: true when the client of the request this thread is handling has closed its
  // connection (for a long non-streamed generation to stop).
  static bool client_gone();

  struct Connection;

 private:
  void poll_loop();
  void worker_loop();
  void accept_ready();
  // Reads what a connection has; true when it still waits for more.
  bool read_ready(Connection& c);
  void dispatch(std::unique_ptr<Connection> c);
  void serve(Connection& c, int write_timeout_ms);
  void close_connection(std::unique_ptr<Connection> c);
  void wake();

  FramingLimits limits_;
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_{0};         // connections accepted and not closed
  std::atomic<size_t> buffered_{0};  // request bytes held
  size_t served_since_trim_ = 0;     // request bytes served since memory was last given back (mu_)

  std::vector<std::unique_ptr<Connection>> waiting_;  // poll thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Connection>> ready_;     // complete requests for the workers
  std::vector<std::unique_ptr<Connection>> returned_; // keep-alive connections back to the poll thread
  std::vector<Connection*> active_;                   // being served by a worker
  std::vector<std::thread> workers_;
  std::thread poller_;
};

}  // namespace strata::server
