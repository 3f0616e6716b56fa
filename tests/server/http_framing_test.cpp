#include "server/http_framing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

namespace strata::server {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// What a long prompt does in a handler: many transient allocations (body, rendering, tokens), then
// one that lives on (the slot's tokens) above them, so the allocator cannot shrink its heap by itself.
std::vector<std::unique_ptr<char[]>> kept;

void transient_work() {
  constexpr size_t kChunk = 1000, kChunks = (96 << 20) / kChunk;  // 96 MiB in small pieces
  std::vector<std::unique_ptr<char[]>> chunks;
  chunks.reserve(kChunks);
  for (size_t i = 0; i < kChunks; ++i) {
    chunks.emplace_back(new char[kChunk]);
    std::fill_n(chunks.back().get(), kChunk, static_cast<char>(i));
  }
  kept.emplace_back(new char[64]);
}

TEST(FramingHttpServer, memory_of_a_large_request_is_given_back_once_nothing_runs) {
  if (kSanitized) GTEST_SKIP() << "the sanitizer's allocator keeps freed memory in quarantine";
  FramingHttpServer http(FramingLimits{});
  http.Post("/work", [](const httplib::Request&, httplib::Response& res) {
    transient_work();
    res.set_content("done", "text/plain");
  });
  auto port = http.bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  http.run();
  const double before = rss_mib();
  httplib::Client client("127.0.0.1", *port);
  auto r = client.Post("/work", std::string(2 << 20, 'x'), "text/plain");  // past the trim's 1 MiB
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // The worker gives memory back after the answer is sent: wait for it, bounded.
  double after = rss_mib();
  for (int i = 0; i < 100 && after > before + 32; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    after = rss_mib();
  }
  EXPECT_LT(after, before + 32) << "RSS " << before << " MiB before a request that freed 96 MiB, " << after
                                << " MiB after it";
  http.stop();
}

}  // namespace
}  // namespace strata::server
