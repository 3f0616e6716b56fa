// An uneven cluster on one machine: two one-thread workers, one held to half a core of CPU time (a
// cgroup of its own, runtime::CpuShare) or, where this host gives no writable cgroup cpu controller, one with two
// threads and one with one. Each measures its speed when it starts (in a speed cache of this test's
// own, one after the other) and reports it at Hello; the plan then follows the measured speeds: the
// slower worker is measured slower, gets fewer layers and a smaller -sm tensor share, and the engine
// over the real workers gives one node's tokens. Run alone (RUN_SERIAL): another test's load on the
// cores would move the speeds it compares.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "base/system.h"
#include "plan/plan_test_util.h"
#include "runtime/cpu_share.h"
#include "runtime/engine.h"
#include "runtime/local_workers.h"
#include "testing/cluster.h"
#include "testing/shared_data.h"

namespace strata::runtime {
namespace {

// A share refuses what no cgroup can hold; where the host allows one, a process that joins it sees its
// quota (cpu_quota_cores, which keys the speed cache) and the cgroup goes when the share does.
TEST(CpuShare, holds_a_process_that_joins_it_to_its_cores) {
  for (double bad : {0.0, 0.01, -1.0, 2000.0, std::nan("")}) EXPECT_FALSE(CpuShare::create(bad).ok()) << bad;
  auto share = CpuShare::create(0.5);
  if (!share.ok()) GTEST_SKIP() << "no writable cgroup cpu controller here: " << share.error().message;
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(share->join() ? static_cast<int>(cpu_quota_cores() * 100) : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 50);
}

std::vector<int32_t> affinity_of(pid_t pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(pid, sizeof set, &set) != 0) return {};
  std::vector<int32_t> out;
  for (int32_t c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// Local workers stand for other machines: when this process's affinity leaves CPUs out (taskset -c 0
// strata bench --local-workers 1), each worker runs on those (threads of its own where there are
// enough) and not on this process's cores; without such a restriction they may run anywhere.
TEST(LocalWorkerCpus, workers_run_on_the_cpus_this_process_leaves_out) {
  EXPECT_EQ(local_worker_cpus({}, 2, 1, 1), std::vector<int32_t>{});
  EXPECT_EQ(local_worker_cpus({2, 3, 4, 5}, 2, 2, 1), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(local_worker_cpus({2, 3, 4}, 2, 2, 0), (std::vector<int32_t>{2, 3, 4}));  // too few: shared
  if (hardware_threads() < 2) GTEST_SKIP() << "one CPU: nothing to leave out";
  cpu_set_t all, first;
  ASSERT_EQ(::sched_getaffinity(0, sizeof all, &all), 0);
  // Unrestricted (the test run under no taskset): nothing is left out.
  if (CPU_COUNT(&all) == hardware_threads()) {
    EXPECT_TRUE(cpus_outside_affinity().empty());
  }
  CPU_ZERO(&first);
  CPU_SET(0, &first);
  ASSERT_EQ(::sched_setaffinity(0, sizeof first, &first), 0);  // this thread only
  std::vector<int32_t> others;
  for (int32_t c = 1; c < hardware_threads(); ++c) others.push_back(c);
  EXPECT_EQ(cpus_outside_affinity(), others);
  ::sched_setaffinity(0, sizeof all, &all);
  WorkerSpawn s;
  s.binary = testing::strata_binary();
  s.cache_dir = (std::filesystem::temp_directory_path() / ("strata-cpus-" + std::to_string(::getpid()))).string();
  s.cpus = local_worker_cpus(others, 1, 1, 0);
  auto w = WorkerProcess::spawn(s);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(affinity_of(w->pid()), std::vector<int32_t>{1});
  EXPECT_EQ(w->stop(), 0);
  std::filesystem::remove_all(s.cache_dir);
}

class UnevenCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = (std::filesystem::temp_directory_path() / ("strata-uneven-speed-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(cache_);
    ::setenv("STRATA_CACHE_DIR", cache_.c_str(), 1);  // workers inherit it: fresh measurements
    // The held worker: half a core where cgroups allow it, else one thread beside the other's two.
    auto probe = CpuShare::create(0.5);
    by_share_ = probe.ok();
    if (!by_share_) why_threads_ = probe.error().message;
  }
  void TearDown() override {
    ::unsetenv("STRATA_CACHE_DIR");
    std::filesystem::remove_all(cache_);
  }
  void hold(int i, WorkerSpawn& s) const {
    if (by_share_) {
      s.threads = 1;
      s.cpu_cores = i == 0 ? 0 : 0.5;
    } else {
      s.threads = i == 0 ? 2 : 1;
    }
  }
  std::string cache_;
  bool by_share_ = false;
  std::string why_threads_;
};

TEST_F(UnevenCluster, the_plan_follows_the_speeds_the_workers_measured) {
  if (!by_share_) std::cout << "no CPU share on this host (" << why_threads_ << "): workers with 2 and 1 threads\n";
  testing::TestCluster cluster(2, 1, "uneven", {}, [&](int i, WorkerSpawn& s) { hold(i, s); });
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  EngineOptions o = testing::cluster_options("", cluster);
  std::vector<plan::Node> nodes = {this_machine(1, true)};
  for (const std::string& endpoint : cluster.endpoints()) {
    auto worker = connector(o.cluster)(endpoint);
    ASSERT_TRUE(worker.ok()) << worker.error().message;
    auto node = worker_node(**worker, o.cluster);
    ASSERT_TRUE(node.ok()) << node.error().message;
    nodes.push_back(std::move(*node));
  }
  // The held worker measured itself slower at what these plans weigh (F32 products).
  // Every figure crossed Hello, the layer work (attention, delta rule) too.
  for (const plan::Node& n : nodes) {
    ASSERT_TRUE(n.speed.known()) << n.name;
    EXPECT_TRUE(n.speed.layer_work.known()) << n.name << ": " << n.speed.text();
  }
  const double fast = nodes[1].speed.seconds(DType::F32, 1), slow = nodes[2].speed.seconds(DType::F32, 1);
  EXPECT_GT(slow, 1.3 * fast) << nodes[1].speed.text() << " | " << nodes[2].speed.text();
  EXPECT_GT(nodes[1].link_seconds, 0);

  // -ts auto over them (links left out: on a 40-layer model this small they would keep every layer
  // here): the slow worker gets fewer layers and a smaller slice than the fast one.
  for (plan::Node& n : nodes) n.link_seconds = 0;
  const auto model = plan::testing::make_model({.n_layer = 40, .n_embd = 256, .n_head = 8, .n_head_kv = 8, .n_ff = 1024},
                                               "uneven");
  auto layers = plan::make_plan(*model, nodes, plan::testing::request());
  ASSERT_TRUE(layers.ok()) << layers.error().message;
  int fast_layers = 0, slow_layers = 0;
  for (int32_t o : layers->layer_owner) fast_layers += o == 1, slow_layers += o == 2;
  EXPECT_LT(slow_layers, fast_layers) << plan::testing::owners(*layers);
  plan::Request tensor = plan::testing::request();
  tensor.split_mode = plan::SplitMode::kTensor;
  auto sliced = plan::make_plan(*model, nodes, tensor);
  ASSERT_TRUE(sliced.ok()) << sliced.error().message;
  EXPECT_LT(sliced->read_per_token[2], sliced->read_per_token[1]);

  // The engine over the real workers loads by -ts auto (on this tiny model the links outweigh its
  // layers, so the prediction may keep them here) and gives one node's tokens.
  STRATA_SHARED_FILE(path, "models/synth/llama-dense-q4_k_m.gguf");
  auto e = Engine::load(testing::cluster_options(path, cluster));
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ((*e)->plan().decisions.front().kind, plan::Decision::Kind::kSplitBySpeed);
  EXPECT_GT((*e)->plan().predicted_tokens_per_s, 0);
  testing::expect_greedy_tokens_of_one_node(**e, path);
}

}  // namespace
}  // namespace strata::runtime
