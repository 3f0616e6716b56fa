#include "base/system.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace strata {
namespace {

// A byte count from a one-value cgroup file; nullopt for "max", absurd values or no file.
std::optional<uint64_t> read_bytes_file(const std::string& path) {
  std::ifstream in(path);
  std::string value;
  if (!(in >> value) || value == "max") return std::nullopt;
  uint64_t v = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  // cgroup v1 reports "no limit" as a huge page-aligned number.
  if (v >= (uint64_t{1} << 60)) return std::nullopt;
  return v;
}

// "Key:   N kB" lines (/proc/meminfo, smaps_rollup after its first line).
std::optional<uint64_t> kb_value(std::istream& in, const std::string& key) {
  std::string k, unit;
  uint64_t kb = 0;
  while (in >> k >> kb) {
    std::getline(in, unit);
    if (k == key + ":") return kb * 1024;
  }
  return std::nullopt;
}

std::optional<uint64_t> meminfo_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  return kb_value(in, key);
}

}  // namespace

uint64_t huge_page_bytes(const std::string& smaps_rollup) {
  std::ifstream in(smaps_rollup);
  std::string header;
  std::getline(in, header);
  return kb_value(in, "AnonHugePages").value_or(0);
}

MemoryFacts read_memory_facts(const std::string& cgroup_root, const std::string& meminfo) {
  MemoryFacts f;
  const uint64_t total = meminfo_value(meminfo, "MemTotal").value_or(0);
  const uint64_t avail = meminfo_value(meminfo, "MemAvailable").value_or(total);
  std::optional<uint64_t> limit = read_bytes_file(cgroup_root + "/memory.max");
  std::optional<uint64_t> used = read_bytes_file(cgroup_root + "/memory.current");
  if (!limit) {
    limit = read_bytes_file(cgroup_root + "/memory/memory.limit_in_bytes");
    used = read_bytes_file(cgroup_root + "/memory/memory.usage_in_bytes");
  }
  f.limit = total;
  f.available = avail;
  if (limit && (total == 0 || *limit < total)) {
    f.cgroup_limited = true;
    f.limit = *limit;
    const uint64_t free_in_cgroup = *limit > used.value_or(0) ? *limit - used.value_or(0) : 0;
    f.available = avail ? std::min(avail, free_in_cgroup) : free_in_cgroup;
  }
  return f;
}

std::vector<std::string> cpu_features() {
  std::vector<std::string> out;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) out.push_back("avx2");
  if (__builtin_cpu_supports("fma")) out.push_back("fma");
  if (cpu_has_f16c()) out.push_back("f16c");
  if (__builtin_cpu_supports("avx512f")) out.push_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) out.push_back("avx512bw");
  if (__builtin_cpu_supports("avx512vl")) out.push_back("avx512vl");
  if (__builtin_cpu_supports("avx512vnni")) out.push_back("avx512_vnni");
#endif
  return out;
}

bool cpu_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

std::vector<int32_t> cpus_outside_affinity() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (::sched_getaffinity(0, sizeof mine, &mine) != 0) return {};
  const long online = std::clamp<long>(::sysconf(_SC_NPROCESSORS_ONLN), 1, CPU_SETSIZE);
  std::vector<int32_t> out;
  for (int32_t c = 0; c < online; ++c) {
    if (!CPU_ISSET(c, &mine)) out.push_back(c);
  }
  return out;
}

int32_t hardware_threads() { return std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency())); }

std::string default_cache_dir() {
  if (const char* d = std::getenv("STRATA_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/strata";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/strata";
  return "/tmp/strata-cache";
}

namespace {

// "quota period" (v2 cpu.max: "max 100000" when unlimited) or the v1 pair, in cores; 0 for none.
double quota_in(const std::string& dir, bool v2) {
  double quota = -1, period = 0;
  if (v2) {
    std::ifstream in(dir + "/cpu.max");
    std::string q;
    if (!(in >> q >> period) || q == "max") return 0;
    quota = std::strtod(q.c_str(), nullptr);
  } else {
    std::ifstream q(dir + "/cpu.cfs_quota_us"), p(dir + "/cpu.cfs_period_us");
    if (!(q >> quota) || !(p >> period)) return 0;
  }
  return quota > 0 && period > 0 ? quota / period : 0;
}

// The tightest quota on `path` and its parents under `root`.
double tightest_quota(const std::string& root, std::string path, bool v2) {
  double best = 0;
  while (true) {
    const double q = quota_in(root + path, v2);
    if (q > 0 && (best == 0 || q < best)) best = q;
    if (path.empty() || path == "/") break;
    path = path.substr(0, path.find_last_of('/'));
  }
  return best;
}

}  // namespace

double cpu_quota_cores(const std::string& proc_cgroup, const std::string& cgroup_root) {
  std::ifstream in(proc_cgroup);
  std::string line;
  double best = 0;
  while (std::getline(in, line)) {
    // "hierarchy-id:controllers:path"; v2 has an empty controller list.
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path.find("..") != std::string::npos) continue;
    double q = 0;
    if (controllers.empty()) {
      q = tightest_quota(cgroup_root, path, true);
      if (q == 0) q = tightest_quota(cgroup_root + "/unified", path, true);
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
      for (const char* dir : {"/cpu", "/cpu,cpuacct", "/cpuacct,cpu"}) {
        if (q == 0) q = tightest_quota(cgroup_root + dir, path, false);
      }
    }
    if (q > 0 && (best == 0 || q < best)) best = q;
  }
  return best;
}

}  // namespace strata
