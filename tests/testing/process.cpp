#include "testing/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata::testing {

std::string shell_quote(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

ProcessResult run_command(const std::string& command) {
  ProcessResult r;
  const auto err_path = std::filesystem::temp_directory_path() /
                        ("strata_test_stderr_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
  FILE* pipe = ::popen((command + " 2>" + shell_quote(err_path.string())).c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_path);
  return r;
}

}  // namespace strata::testing

namespace strata::testing {

bool ChildProcess::start(const std::vector<std::string>& argv, const std::string& log_path, ChildProcess& out) {
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    FILE* log = std::fopen(log_path.c_str(), "w");
    if (log) {
      ::dup2(fileno(log), STDOUT_FILENO);
      ::dup2(fileno(log), STDERR_FILENO);
    }
    ::execv(cargs[0], cargs.data());
    ::_exit(127);
  }
  out.pid_ = pid;
  return true;
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid_ = -1;
    return false;
  }
  return true;
}

bool ChildProcess::wait_for_file(const std::string& path, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 50) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec) && std::filesystem::file_size(path, ec) > 0) return true;
    if (!running()) return false;
    ::usleep(50000);
  }
  return false;
}

int ChildProcess::wait_exit(int timeout_ms) {
  for (int waited = 0; waited <= timeout_ms; waited += 50) {
    if (!running()) return status_;
    ::usleep(50000);
  }
  return -1;
}

void ChildProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (wait_exit(3000) < 0 && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

}  // namespace strata::testing
