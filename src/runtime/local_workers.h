// Worker child processes: `--local-workers N` starts N `strata worker` processes on loopback for a
// multi-node run on one machine (random token, free ports, stopped when this process exits). Tests use
// WorkerProcess to start, kill and restart single workers.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/cpu_share.h"

namespace strata::runtime {

struct WorkerSpawn {
  std::string binary;      // the strata binary; empty: this process's own executable
  int32_t port = 0;        // 0: the worker picks a free port
  int32_t threads = 1;
  std::string token_file;  // empty: no token
  std::string cache_dir;
  std::vector<std::string> extra_args;
  std::string log_path;    // appends the worker's stderr (its log) here; empty: inherits this process's
  double cpu_cores = 0;    // > 0: held to this much CPU time in a cgroup of its own (CpuShare)
  std::vector<int32_t> cpus;  // non-empty: runs on these CPUs only (its affinity)
};

class WorkerProcess {
 public:
  // Starts a worker on 127.0.0.1 and waits (up to 60 s: its first start on a host measures its speed)
  // until it prints its port.
  static Result<WorkerProcess> spawn(const WorkerSpawn& spawn);
  WorkerProcess() = default;
  WorkerProcess(WorkerProcess&& o) noexcept { *this = std::move(o); }
  WorkerProcess& operator=(WorkerProcess&& o) noexcept;
  ~WorkerProcess() { stop(); }

  const std::string& endpoint() const { return endpoint_; }
  int32_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // SIGTERM, then SIGKILL after 10 s; waits for the process and returns its exit status (128 + signal
  // when a signal ended it). A worker stopped this way exits with 0 unless something went wrong in it
  // (e.g. a sanitizer report). Returns the last status when the process was already reaped, -1 if none.
  int stop();
  // Sends `sig` (e.g. SIGKILL) and reaps the process; returns its exit status like stop().
  int kill(int sig);

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  CpuShare share_;  // removed once the process is reaped
  int32_t port_ = 0;
  std::string endpoint_;
};

class LocalWorkers {
 public:
  // Starts n workers with `threads` threads each and a shared random token; `cpu_cores`, when given
  // (one value per worker, 0 for none), holds each to that much CPU time (CpuShare).
  static Result<LocalWorkers> start(int32_t n, int32_t threads, const std::string& cache_dir,
                                    const std::vector<double>& cpu_cores = {});
  LocalWorkers() = default;
  LocalWorkers(LocalWorkers&& o) noexcept { *this = std::move(o); }
  LocalWorkers& operator=(LocalWorkers&& o) noexcept;
  ~LocalWorkers() { stop(); }

  std::vector<std::string> endpoints() const;
  const std::string& token() const { return token_; }
  // Stops every worker; false (with an error logged) if one did not exit cleanly.
  bool stop();

 private:
  std::vector<WorkerProcess> workers_;
  std::string token_;
  std::string token_file_;
};

// Local worker i's CPUs (of n, `threads` each) among `spare` (cpus_outside_affinity): its own
// `threads` of them when there are enough for every worker, else all of them shared; none (it may run
// anywhere) when nothing is spare.
std::vector<int32_t> local_worker_cpus(const std::vector<int32_t>& spare, int32_t n, int32_t threads, int32_t i);

// Writes a token to a new 0600 file; returns its path.
Result<std::string> write_token_file(const std::string& token);
std::string random_token();

}  // namespace strata::runtime
