#include "testing/process.h"

#include <gtest/gtest.h>

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

std::string log_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  return text.size() > max_bytes ? "..." + text.substr(text.size() - max_bytes) : text;
}

bool expect_clean_exit(int status, const std::string& what, const std::string& log_path) {
  if (status == 0) return true;
  std::string how = "exited with status " + std::to_string(status);
  if (status == 128 + SIGKILL) how += " (killed: it did not exit within the grace period after SIGTERM)";
  else if (status > 128) how += " (signal " + std::to_string(status - 128) + ")";
  else if (status < 0) how = "was never started or its status is unknown";
  ADD_FAILURE() << what << " " << how << "; a sanitizer report or a crash makes a stopped process exit non-zero."
                << "\n--- tail of " << log_path << " ---\n" << log_tail(log_path);
  return false;
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

int ChildProcess::stop() {
  if (pid_ <= 0 || !running()) return status_;
  ::kill(pid_, SIGTERM);
  if (wait_exit(10000) < 0 && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    status_ = 128 + SIGKILL;
    pid_ = -1;
  }
  return status_;
}

}  // namespace strata::testing
