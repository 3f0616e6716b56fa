#include "runtime/cpu_share.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <optional>
#include <string>

namespace strata::runtime {
namespace {

// A short period: with the usual 100 ms, a node busy for 20 ms of each token never meets its quota
// and runs at full speed, and a held -sm tensor member stalls its whole group for tens of ms; with
// 2 ms, bursts of a few ms are held to the share and a stall costs the group at most ~1 ms (10 ms
// made a tensor split far slower than its members' speeds predict). A share of a whole core or more
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

// A new cgroup under `root` with `files` written (its quota); on failure `why` says what failed.
std::optional<CpuShare> CpuShare::make(const std::string& root, const std::vector<std::pair<std::string, std::string>>& files,
                                       double cores, std::string& why) {
  const std::string dir = root + new_name();
  if (::mkdir(dir.c_str(), 0755) != 0) {
    why = "cannot create " + dir;
    return std::nullopt;
  }
  CpuShare s;
  s.dir_ = dir, s.procs_ = dir + "/cgroup.procs", s.cores_ = cores;
  for (const auto& [name, value] : files) {
    if (!write_file(dir + "/" + name, value)) {
      why = "cannot write " + dir + "/" + name + " (is the cpu controller enabled there?)";
      return std::nullopt;  // s removes the directory
    }
  }
  return s;
}

Result<CpuShare> CpuShare::create(double cores) {
  if (!std::isfinite(cores) || cores < 0.05 || cores > 1024) return make_error("CPU share {} out of range 0.05..1024 cores", cores);
  const std::string period = std::to_string(period_us(cores)),
                    quota = std::to_string(std::lround(cores * static_cast<double>(period_us(cores))));
  std::string why;
  // At the top of the hierarchy (beside this process's cgroup, not in it: a child cannot have more
  // than its parent, and the coordinator may be held to a share of its own). cgroup v1 first: the cpu
  // hierarchy (cpu or cpu,cpuacct).
  for (const std::string root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    if (::access((root + "/cgroup.procs").c_str(), W_OK) != 0) continue;
    if (auto s = make(root, {{"cpu.cfs_period_us", period}, {"cpu.cfs_quota_us", quota}}, cores, why)) return std::move(*s);
  }
  // cgroup v2: a cgroup with the cpu controller (enabled for the root's children by most systems).
  for (const std::string root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    if (::access((root + "/cgroup.subtree_control").c_str(), W_OK) != 0) continue;
    write_file(root + "/cgroup.subtree_control", "+cpu");  // refused where the root holds processes itself
    if (auto s = make(root, {{"cpu.max", quota + " " + period}}, cores, why)) return std::move(*s);
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
