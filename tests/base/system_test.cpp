// Usable memory is cgroup-aware: a container capped at 18 GiB reports 18 GiB, whatever the host has.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/system.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("strata-fake-cgroup-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "cgroup" / "memory");
    write("meminfo", "MemTotal:       65536000 kB\nMemFree:        1000 kB\nMemAvailable:   60000000 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) { std::ofstream(root_ / rel) << text; }
  MemoryFacts facts() { return read_memory_facts((root_ / "cgroup").string(), (root_ / "meminfo").string()); }
  fs::path root_;
};

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST_F(FakeProc, cgroup_v2_limit_caps_usable_memory) {
  write("cgroup/memory.max", std::to_string(18 * kGiB) + "\n");
  write("cgroup/memory.current", std::to_string(2 * kGiB) + "\n");
  const MemoryFacts f = facts();
  EXPECT_TRUE(f.cgroup_limited);
  EXPECT_EQ(f.limit, 18 * kGiB);
  EXPECT_EQ(f.available, 16 * kGiB);
}

TEST_F(FakeProc, cgroup_v2_max_means_no_limit) {
  write("cgroup/memory.max", "max\n");
  const MemoryFacts f = facts();
  EXPECT_FALSE(f.cgroup_limited);
  EXPECT_EQ(f.limit, 65536000ull * 1024);
  EXPECT_EQ(f.available, 60000000ull * 1024);
}

TEST_F(FakeProc, cgroup_v1_limit_and_usage) {
  write("cgroup/memory/memory.limit_in_bytes", std::to_string(18 * kGiB) + "\n");
  write("cgroup/memory/memory.usage_in_bytes", std::to_string(kGiB) + "\n");
  const MemoryFacts f = facts();
  EXPECT_TRUE(f.cgroup_limited);
  EXPECT_EQ(f.limit, 18 * kGiB);
  EXPECT_EQ(f.available, 17 * kGiB);
}

TEST_F(FakeProc, cgroup_v1_unlimited_sentinel_is_ignored) {
  write("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_FALSE(facts().cgroup_limited);
}

TEST_F(FakeProc, garbage_in_cgroup_files_is_ignored) {
  write("cgroup/memory.max", "lots\n");
  EXPECT_FALSE(facts().cgroup_limited);
}

TEST_F(FakeProc, huge_page_bytes_read_after_the_rollup_header) {
  write("smaps", "55d0c0000000-7ffd00000000 ---p 00000000 00:00 0                  [rollup]\n"
                 "Rss:              928892 kB\nAnonHugePages:    866304 kB\nShmemHugePages:        0 kB\n");
  EXPECT_EQ(huge_page_bytes((root_ / "smaps").string()), uint64_t{866304} * 1024);
  write("smaps", "garbage\nRss: lots\n");
  EXPECT_EQ(huge_page_bytes((root_ / "smaps").string()), 0u);
  EXPECT_EQ(huge_page_bytes((root_ / "missing").string()), 0u);
}

// The CPU quota (a node's speed is cached per quota): v2 cpu.max, v1 cfs quota over period, the
// tightest on the path from the root; "max", -1 or no file mean none.
TEST_F(FakeProc, cpu_quota_is_the_tightest_on_the_cgroup_path_in_v1_and_v2) {
  auto quota = [&] { return cpu_quota_cores((root_ / "proc-cgroup").string(), (root_ / "cgroup").string()); };
  write("proc-cgroup", "0::/a/b\n");
  EXPECT_EQ(quota(), 0.0);  // no files: unlimited
  fs::create_directories(root_ / "cgroup" / "a" / "b");
  write("cgroup/a/b/cpu.max", "max 100000\n");
  EXPECT_EQ(quota(), 0.0);
  write("cgroup/a/cpu.max", "150000 100000\n");
  EXPECT_DOUBLE_EQ(quota(), 1.5);
  write("cgroup/a/b/cpu.max", "50000 100000\n");
  EXPECT_DOUBLE_EQ(quota(), 0.5);
  // v1: the cpu hierarchy, named by its controllers.
  write("proc-cgroup", "4:memory:/x\n3:cpu,cpuacct:/w\n0::/\n");
  fs::create_directories(root_ / "cgroup" / "cpu,cpuacct" / "w");
  write("cgroup/cpu,cpuacct/w/cpu.cfs_quota_us", "-1\n");
  write("cgroup/cpu,cpuacct/w/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(quota(), 0.0);
  write("cgroup/cpu,cpuacct/w/cpu.cfs_quota_us", "1000\n");
  write("cgroup/cpu,cpuacct/w/cpu.cfs_period_us", "2000\n");
  EXPECT_DOUBLE_EQ(quota(), 0.5);
  write("proc-cgroup", "3:cpu:/../../etc\n");  // a path that climbs out is not followed
  EXPECT_EQ(quota(), 0.0);
}

TEST(System, this_machine_reports_some_memory_and_threads) {
  const MemoryFacts f = read_memory_facts();
  EXPECT_GT(f.limit, 0u);
  EXPECT_GT(f.available, 0u);
  EXPECT_GE(hardware_threads(), 1);
}

}  // namespace
}  // namespace strata
