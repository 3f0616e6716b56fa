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

TEST(System, this_machine_reports_some_memory_and_threads) {
  const MemoryFacts f = read_memory_facts();
  EXPECT_GT(f.limit, 0u);
  EXPECT_GT(f.available, 0u);
  EXPECT_GE(hardware_threads(), 1);
}

}  // namespace
}  // namespace strata
