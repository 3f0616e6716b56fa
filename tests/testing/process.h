// Runs a command line and captures its output and exit status (for tests of the strata binary).
#pragma once

#include <string>
#include <vector>

namespace strata::testing {

struct ProcessResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `command` through /bin/sh.
ProcessResult run_command(const std::string& command);

// Quotes an argument for /bin/sh.
std::string shell_quote(const std::string& arg);

// The last `max_bytes` of a file (a child's log), "" if it cannot be read.
std::string log_tail(const std::string& path, size_t max_bytes = 4000);

// A child that was stopped normally (SIGTERM) must have exited with status 0: a sanitizer report
// (ASan, LSan, UBSan with halt_on_error) or a crash makes it non-zero. Records a test failure naming
// `what` and showing the tail of its log otherwise; returns whether it was clean.
bool expect_clean_exit(int status, const std::string& what, const std::string& log_path);

}  // namespace strata::testing

namespace strata::testing {

// A child process (e.g. `strata serve`) that is killed when this object goes away.
class ChildProcess {
 public:
  // Starts argv[0] with the arguments; stdout and stderr go to `log_path`.
  static bool start(const std::vector<std::string>& argv, const std::string& log_path, ChildProcess& out);
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { stop(); }
  // Waits until `path` exists and is non-empty, or the process exits, or the timeout passes.
  bool wait_for_file(const std::string& path, int timeout_ms);
  // The exit status once the process has ended (waits up to timeout_ms); -1 if still running.
  int wait_exit(int timeout_ms);
  bool running();
  // SIGTERM, then SIGKILL after 10 s; returns the exit status (128 + signal when killed by one), also
  // when the process had already ended; -1 if it was never started.
  int stop();
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
  int status_ = -1;
};

}  // namespace strata::testing
