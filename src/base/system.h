// Facts about this machine that placement depends on: usable memory (cgroup-aware) and CPU features.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct MemoryFacts {
  uint64_t limit = 0;      // usable bytes: the smaller of the cgroup limit and physical memory
  uint64_t available = 0;  // usable now: limit minus what the cgroup already uses, capped by MemAvailable
  bool cgroup_limited = false;
};

// Reads cgroup v2 (memory.max, memory.current) or v1 (memory.limit_in_bytes, memory.usage_in_bytes)
// under `cgroup_root`, and `meminfo` (a /proc/meminfo-format file). Missing files mean no limit.
MemoryFacts read_memory_facts(const std::string& cgroup_root = "/sys/fs/cgroup",
                              const std::string& meminfo = "/proc/meminfo");

// Bytes of this process's anonymous memory in transparent huge pages (0 when the kernel does not say).
uint64_t huge_page_bytes(const std::string& smaps_rollup = "/proc/self/smaps_rollup");

// CPU features relevant to the kernels, e.g. {"avx2", "fma", "f16c", "avx512f", "avx512_vnni"}.
std::vector<std::string> cpu_features();
// F16C (half <-> float conversion). Asked through CPUID: clang's __builtin_cpu_supports does not know
// "f16c" before clang 16.
bool cpu_has_f16c();

int32_t hardware_threads();

// The online CPUs the calling thread's affinity mask leaves out (none when it may run on all of
// them): where processes started to stand for other machines run without taking its cores.
std::vector<int32_t> cpus_outside_affinity();

// Where this host keeps what it computes once (weight hashes, received weights, its measured speed):
// $STRATA_CACHE_DIR, else $XDG_CACHE_HOME/strata, else ~/.cache/strata, else /tmp/strata-cache.
std::string default_cache_dir();

// The CPU time this process's cgroup may use, in cores (cgroup v2 cpu.max or v1 cpu.cfs_quota_us over
// its period, the tightest on the path from the root); 0 when unlimited. `proc_cgroup` is
// /proc/self/cgroup's format; `cgroup_root` holds the v2 tree and the v1 "cpu" hierarchy.
double cpu_quota_cores(const std::string& proc_cgroup = "/proc/self/cgroup",
                       const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace strata
