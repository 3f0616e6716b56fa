#include "runtime/cpu_share.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <string>

namespace strata::runtime {
namespace {

// A short period: with the usual 100 ms, a node busy for 20 ms of each token never meets its quota
// and runs at full speed, and a held -sm tensor member stalls its whole group for tens of ms; with
// 2 ms, bursts of a few ms are held to the share and a stall costs the group at most ~1 ms (10 ms
// made a tensor split 3x slower than its members' speeds predict). A share of a whole core or more
// is not worth holding a one-thread worker to: the quota is handed out in slices, and a quota equal
// to a short period throttles even a process within it.
long period_us(double cores) { return std::max(2000L, std::lround(std::ceil(1000.0 / cores))); }

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

std::string new_name() {
  static std::atomic<int> counter{0};
  return "/strata-share-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

}  // namespace

CpuShare& CpuShare::operator=(CpuShare&& o) noexcept {
  if (this != &o) {
    remove();
    dir_ = std::move(o.dir_);
    procs_ = std::move(o.procs_);
    cores_ = o.cores_;
    o.dir_.clear();
  }
  return *this;
}

Result<CpuShare> CpuShare::create(double cores) {
  if (!std::isfinite(cores) || cores < 0.05 || cores > 1024) return make_error("CPU share {} out of range 0.05..1024 cores", cores);
  const long period = period_us(cores), quota = std::lround(cores * static_cast<double>(period));
  std::string why;
  // At the top of the hierarchy (beside this process's cgroup, not in it: a child cannot have more
  // than its parent, and the coordinator may be held to a share of its own).
  // cgroup v1: the cpu hierarchy (cpu or cpu,cpuacct).
  for (const std::string root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    if (::access((root + "/cgroup.procs").c_str(), W_OK) != 0) continue;
    const std::string dir = root + new_name();
    if (::mkdir(dir.c_str(), 0755) != 0) {
      why = "cannot create " + dir;
      continue;
    }
    CpuShare s;
    s.dir_ = dir, s.procs_ = dir + "/cgroup.procs", s.cores_ = cores;
    if (write_file(dir + "/cpu.cfs_period_us", std::to_string(period)) &&
        write_file(dir + "/cpu.cfs_quota_us", std::to_string(quota))) {
      return s;
    }
    why = "cannot set the quota of " + dir;
  }
  // cgroup v2: a cgroup with the cpu controller (enabled for the root's children by most systems).
  for (const std::string root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    if (::access((root + "/cgroup.subtree_control").c_str(), W_OK) != 0) continue;
    write_file(root + "/cgroup.subtree_control", "+cpu");  // refused where the root holds processes itself
    const std::string dir = root + new_name();
    if (::mkdir(dir.c_str(), 0755) != 0) {
      why = "cannot create " + dir;
      continue;
    }
    CpuShare s;
    s.dir_ = dir, s.procs_ = dir + "/cgroup.procs", s.cores_ = cores;
    if (write_file(dir + "/cpu.max", std::to_string(quota) + " " + std::to_string(period))) return s;
    why = "the cpu controller is not enabled for " + root + "'s children";
  }
  return make_error("no writable cgroup cpu controller here ({})", why.empty() ? "no cgroup tree found" : why);
}

bool CpuShare::join() const {
  if (procs_.empty()) return false;
  const int fd = ::open(procs_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "0", 1) == 1;
  ::close(fd);
  return ok;
}

void CpuShare::remove() {
  if (dir_.empty()) return;
  ::rmdir(dir_.c_str());  // fails harmlessly while a process is still inside
  dir_.clear();
}

}  // namespace strata::runtime
