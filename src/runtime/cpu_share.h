// A CPU share for a child process: a cgroup of its own whose quota holds it to a number of cores of
// CPU time (cgroup v1's cpu.cfs_quota_us, or v2's cpu.max). An uneven cluster on one machine: local
// workers held to different shares, for tests and benchmarks of how the plan weighs node speeds.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace strata::runtime {

class CpuShare {
 public:
  // A new cgroup under this process's own, holding its processes to `cores` (0.05..1024) of CPU time.
  // Fails, naming why, where the host gives no writable cpu controller (then use fewer threads).
  static Result<CpuShare> create(double cores);
  CpuShare() = default;
  CpuShare(CpuShare&& o) noexcept { *this = std::move(o); }
  CpuShare& operator=(CpuShare&& o) noexcept;
  ~CpuShare() { remove(); }

  bool empty() const { return dir_.empty(); }
  double cores() const { return cores_; }
  // Moves the calling process into the share. Only open/write/close: safe between fork and exec.
  bool join() const;
  // Removes the cgroup (once no process is left in it).
  void remove();

 private:
  static std::optional<CpuShare> make(const std::string& root, const std::vector<std::pair<std::string, std::string>>& files,
                                      double cores, std::string& why);
  std::string dir_, procs_;
  double cores_ = 0;
};

}  // namespace strata::runtime
