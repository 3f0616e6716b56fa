// Runs a command line and captures its output and exit status (for tests of the strata binary).
#pragma once

#include <string>

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

}  // namespace strata::testing
