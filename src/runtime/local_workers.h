// `--local-workers N`: N `strata worker` child processes on loopback, for a multi-node run on one
// machine. They get a random token, pick free ports, and stop when this process exits.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace strata::runtime {

class LocalWorkers {
 public:
  // Starts n workers with `threads` threads each; waits until each prints its port.
  static Result<LocalWorkers> start(int32_t n, int32_t threads, const std::string& cache_dir);
  LocalWorkers() = default;
  LocalWorkers(LocalWorkers&&) noexcept;
  LocalWorkers& operator=(LocalWorkers&&) noexcept;
  ~LocalWorkers();

  const std::vector<std::string>& endpoints() const { return endpoints_; }
  const std::string& token() const { return token_; }
  const std::vector<pid_t>& pids() const { return pids_; }
  void stop();

 private:
  std::vector<pid_t> pids_;
  std::vector<std::string> endpoints_;
  std::string token_;
  std::string token_file_;
};

}  // namespace strata::runtime
