#include "runtime/local_workers.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>

#include "base/system.h"

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

std::string self_executable() {
  char buf[4096];
  const ssize_t len = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return len > 0 ? std::string(buf, static_cast<size_t>(len)) : "";
}

}  // namespace

std::string random_token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

Result<std::string> write_token_file(const std::string& token) {
  static std::atomic<int> counter{0};
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("strata-token-{}-{}", ::getpid(), counter++)).string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return make_error("cannot write {}", path);
  const std::string line = token + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) return make_error("cannot write {}", path);
  return path;
}

WorkerProcess& WorkerProcess::operator=(WorkerProcess&& o) noexcept {
  if (this != &o) {
    stop();
    pid_ = o.pid_;
    status_ = o.status_;
    share_ = std::move(o.share_);
    port_ = o.port_;
    endpoint_ = std::move(o.endpoint_);
    o.pid_ = -1;
  }
  return *this;
}

Result<WorkerProcess> WorkerProcess::spawn(const WorkerSpawn& s) {
  const std::string binary = s.binary.empty() ? self_executable() : s.binary;
  if (binary.empty()) return make_error("cannot find the strata binary");
  std::vector<std::string> args = {binary, "-q", "worker", "-H", "127.0.0.1", "-p", std::to_string(s.port),
                                   "-t", std::to_string(s.threads)};
  if (!s.token_file.empty()) args.insert(args.end(), {"--token-file", s.token_file});
  if (!s.cache_dir.empty()) args.insert(args.end(), {"--cache-dir", s.cache_dir});
  args.insert(args.end(), s.extra_args.begin(), s.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int log_fd = -1;
  if (!s.log_path.empty()) {
    log_fd = ::open(s.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return make_error("cannot open the worker log {}", s.log_path);
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    if (log_fd >= 0) ::close(log_fd);
    return make_error("pipe failed");
  }
  CpuShare share;
  if (s.cpu_cores > 0) {
    auto created = CpuShare::create(s.cpu_cores);
    if (!created.ok()) {
      ::close(out[0]), ::close(out[1]);
      if (log_fd >= 0) ::close(log_fd);
      return make_error("cannot hold the worker to {} cores: {}", s.cpu_cores, created.error().message);
    }
    share = std::move(*created);
  }
  cpu_set_t cpus;  // built here: the child only makes system calls
  CPU_ZERO(&cpus);
  for (int32_t c : s.cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return make_error("CPU {} out of range 0..{}", c, CPU_SETSIZE - 1);
    CPU_SET(c, &cpus);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return make_error("fork failed");
  if (pid == 0) {
    // The child dies with the coordinator, even if the coordinator is killed.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    if (!share.empty() && !share.join()) ::_exit(126);
    if (!s.cpus.empty() && ::sched_setaffinity(0, sizeof cpus, &cpus) != 0) ::_exit(125);
    ::dup2(out[1], STDOUT_FILENO);
    if (log_fd >= 0) ::dup2(log_fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  if (log_fd >= 0) ::close(log_fd);
  WorkerProcess w;
  w.pid_ = pid;
  w.share_ = std::move(share);
  auto line = read_line(out[0], std::chrono::steady_clock::now() + std::chrono::seconds(60));
  ::close(out[0]);
  const std::string prefix = "strata worker listening on ";
  if (!line.ok() || line->rfind(prefix, 0) != 0) {
    return make_error("worker did not start: {}", line.ok() ? *line : line.error().message);
  }
  w.endpoint_ = line->substr(prefix.size());
  w.port_ = std::stoi(w.endpoint_.substr(w.endpoint_.rfind(':') + 1));
  return w;
}

namespace {
int exit_status(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}
}  // namespace

int WorkerProcess::kill(int sig) {
  if (pid_ <= 0) return status_;
  ::kill(pid_, sig);
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_) status_ = exit_status(status);
  pid_ = -1;
  share_.remove();
  return status_;
}

int WorkerProcess::stop() {
  if (pid_ <= 0) return status_;
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 500; ++i) {  // the worker gives open calls up to 2 s; a sanitizer's exit checks take a while
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      status_ = exit_status(status);
      pid_ = -1;
      share_.remove();
      return status_;
    }
    ::usleep(20000);
  }
  return kill(SIGKILL);
}

LocalWorkers& LocalWorkers::operator=(LocalWorkers&& o) noexcept {
  if (this != &o) {
    stop();
    workers_ = std::move(o.workers_);
    token_ = std::move(o.token_);
    token_file_ = std::move(o.token_file_);
    o.token_file_.clear();
  }
  return *this;
}

std::vector<std::string> LocalWorkers::endpoints() const {
  std::vector<std::string> out;
  for (const WorkerProcess& w : workers_) out.push_back(w.endpoint());
  return out;
}

bool LocalWorkers::stop() {
  bool clean = true;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].running()) continue;
    const pid_t pid = workers_[i].pid();
    if (const int status = workers_[i].stop(); status != 0) {
      spdlog::error("local worker {} (pid {}) exited with status {}", i, pid, status);
      clean = false;
    }
  }
  workers_.clear();
  if (!token_file_.empty()) std::filesystem::remove(token_file_);
  token_file_.clear();
  return clean;
}

std::vector<int32_t> local_worker_cpus(const std::vector<int32_t>& spare, int32_t n, int32_t threads, int32_t i) {
  const size_t own = static_cast<size_t>(std::max(1, threads));
  if (spare.size() < own * static_cast<size_t>(n)) return spare;
  return {spare.begin() + static_cast<std::ptrdiff_t>(own * i), spare.begin() + static_cast<std::ptrdiff_t>(own * (i + 1))};
}

namespace {

std::string cpu_list(const std::vector<int32_t>& cpus) {
  std::string s;
  for (int32_t c : cpus) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

}  // namespace

Result<LocalWorkers> LocalWorkers::start(int32_t n, int32_t threads, const std::string& cache_dir,
                                         const std::vector<double>& cpu_cores) {
  if (n < 1 || n > 16) return make_error("--local-workers {} out of range 1..16", n);
  if (!cpu_cores.empty() && cpu_cores.size() != static_cast<size_t>(n)) {
    return make_error("--local-worker-cpus has {} values for {} local workers", cpu_cores.size(), n);
  }
  // Stand-ins for other machines keep off this process's cores when its affinity leaves some out
  // (taskset -c 0 strata bench --local-workers 1): on one host a node's cores then stay its own.
  const std::vector<int32_t> spare = cpus_outside_affinity();
  LocalWorkers w;
  w.token_ = random_token();
  STRATA_ASSIGN(w.token_file_, write_token_file(w.token_));
  for (int32_t i = 0; i < n; ++i) {
    WorkerSpawn s;
    s.threads = threads;
    s.token_file = w.token_file_;
    s.cache_dir = cache_dir + "/local-worker-" + std::to_string(i);
    s.cpu_cores = cpu_cores.empty() ? 0 : cpu_cores[i];
    s.cpus = local_worker_cpus(spare, n, threads, i);
    auto p = WorkerProcess::spawn(s);
    if (!p.ok()) return make_error("local worker {}: {}", i, p.error().message);
    spdlog::info("local worker {} (pid {}) on {}{}{}", i, p->pid(), p->endpoint(),
                 s.cpu_cores > 0 ? fmt::format(", held to {} cores of CPU time", s.cpu_cores) : "",
                 s.cpus.empty() ? "" : fmt::format(", on CPUs {} (outside this process's affinity)", cpu_list(s.cpus)));
    w.workers_.push_back(std::move(*p));
  }
  return w;
}

}  // namespace strata::runtime
