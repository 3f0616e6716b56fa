#include "base/system.h"

#include <algorithm>
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

int32_t hardware_threads() { return std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency())); }

}  // namespace strata
