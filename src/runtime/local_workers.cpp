#include "runtime/local_workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

namespace strata::runtime {
namespace {

// Reads one line from fd within the deadline.
Result<std::string> read_line(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string line;
  char c;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return make_error("timed out");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) return make_error("exited before it was ready");
    if (c == '\n') return line;
    line += c;
  }
}

}  // namespace

LocalWorkers::LocalWorkers(LocalWorkers&& o) noexcept { *this = std::move(o); }

LocalWorkers& LocalWorkers::operator=(LocalWorkers&& o) noexcept {
  if (this != &o) {
    stop();
    pids_ = std::move(o.pids_);
    endpoints_ = std::move(o.endpoints_);
    token_ = std::move(o.token_);
    token_file_ = std::move(o.token_file_);
    o.pids_.clear();
    o.token_file_.clear();
  }
  return *this;
}

LocalWorkers::~LocalWorkers() { stop(); }

void LocalWorkers::stop() {
  for (pid_t pid : pids_) ::kill(pid, SIGTERM);
  for (pid_t pid : pids_) {
    int status = 0;
    for (int i = 0; i < 50 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) ::usleep(20000);
    if (::waitpid(pid, &status, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }
  pids_.clear();
  if (!token_file_.empty()) std::filesystem::remove(token_file_);
  token_file_.clear();
}

Result<LocalWorkers> LocalWorkers::start(int32_t n, int32_t threads, const std::string& cache_dir) {
  if (n < 1 || n > 16) return make_error("--local-workers {} out of range 1..16", n);
  LocalWorkers w;
  std::random_device rd;
  w.token_ = fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
  w.token_file_ = (std::filesystem::temp_directory_path() / fmt::format("strata-token-{}", ::getpid())).string();
  {
    const int fd = ::open(w.token_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return make_error("cannot write {}", w.token_file_);
    const std::string line = w.token_ + "\n";
    const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    if (!ok) return make_error("cannot write {}", w.token_file_);
  }
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return make_error("cannot find the strata binary (/proc/self/exe)");
  self[len] = 0;
  const pid_t parent = ::getpid();
  for (int32_t i = 0; i < n; ++i) {
    int out[2];
    if (::pipe(out) != 0) return make_error("pipe failed");
    const pid_t pid = ::fork();
    if (pid < 0) return make_error("fork failed");
    if (pid == 0) {
      // The child dies with the coordinator, even if the coordinator is killed.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      const std::string t = std::to_string(threads);
      const std::string cache = cache_dir + "/local-worker-" + std::to_string(i);
      ::execl(self, self, "-q", "worker", "-H", "127.0.0.1", "-p", "0", "-t", t.c_str(), "--token-file",
              w.token_file_.c_str(), "--cache-dir", cache.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    w.pids_.push_back(pid);
    auto line = read_line(out[0], std::chrono::steady_clock::now() + std::chrono::seconds(30));
    ::close(out[0]);
    const std::string prefix = "strata worker listening on ";
    if (!line.ok() || line->rfind(prefix, 0) != 0) {
      return make_error("local worker {} did not start: {}", i, line.ok() ? *line : line.error().message);
    }
    w.endpoints_.push_back(line->substr(prefix.size()));
    spdlog::info("local worker {} (pid {}) on {}", i, pid, w.endpoints_.back());
  }
  return w;
}

}  // namespace strata::runtime
