// A `strata serve` child process for the server tests, ready to take requests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata::testing {

inline std::filesystem::path server_tmp_dir() { return std::filesystem::temp_directory_path() / "strata-server-tests"; }

// The files of one server, unique to this process and this server: ctest runs the tests of one file
// in parallel processes, and two servers named alike once shared (and truncated) one log (CI:
// Failover.without_the_killed_layer_worker_... found its own warning gone).
inline std::filesystem::path server_file(const std::string& name, const std::string& ext) {
  static std::atomic<int> count{0};
  return server_tmp_dir() / (name + "-" + std::to_string(::getpid()) + "-" + std::to_string(count++) + ext);
}

// npm packages for the client-side tests (the official SDKs, a headless browser driver, ajv and a
// real coding-agent CLI), installed once into the build tree, and the test scripts beside them.
// Tests run in parallel (ctest -j): an exclusive lock covers the check, the install and the scripts'
// copy, and a marker written after a complete install (not the presence of a package folder) says
// it is done.
inline std::string node_clients_dir() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(STRATA_BUILD_DIR) / "node";
  fs::create_directories(dir);
  const int lock = ::open((dir / ".install.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  EXPECT_GE(lock, 0) << "cannot open the npm install lock";
  if (lock >= 0) ::flock(lock, LOCK_EX);
  const fs::path marker = dir / ".installed-openai7-playwright1-anthropic1-ajv8-claude-code2.1";
  if (!fs::exists(marker)) {
    const auto r = run_command("npm install --no-audit --no-fund --loglevel=error --prefix " + shell_quote(dir.string()) +
                               " openai@7 playwright-core@1 @anthropic-ai/sdk@1 ajv@8 @anthropic-ai/claude-code@2.1");
    EXPECT_EQ(r.exit_code, 0) << "npm install failed: " << r.err;
    if (r.exit_code == 0) std::ofstream(marker) << "ok\n";
  }
  for (const char* script : {"openai_client.mjs", "web_page.mjs", "chat_clients.mjs", "agent_clients.mjs"}) {
    fs::copy_file(fs::path(STRATA_SOURCE_DIR) / "tests" / "server" / script, dir / script,
                  fs::copy_options::overwrite_existing);
  }
  if (lock >= 0) ::close(lock);  // releases the lock
  return dir.string();
}

class ServeProcess {
 public:
  ServeProcess(std::vector<std::string> args, const std::string& name) {
    namespace fs = std::filesystem;
    fs::create_directories(server_tmp_dir());
    ready_ = server_file(name, ".ready").string();
    log_ = server_file(name, ".log").string();
    fs::remove(ready_);
    std::vector<std::string> argv = {strata_binary(), "serve", "--port", "0", "--ready-file", ready_};
    argv.insert(argv.end(), args.begin(), args.end());
    ok_ = ChildProcess::start(argv, log_, process_) && process_.wait_for_file(ready_, 120000);
    if (ok_) {
      std::ifstream in(ready_);
      std::string endpoint;
      in >> endpoint;
      host_ = endpoint.substr(0, endpoint.rfind(':'));
      port_ = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
    }
  }
  bool ok() const { return ok_; }
  std::string log() const { return read_text_file(log_); }
  const std::string& log_path() const { return log_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  std::string url() const { return "http://" + host_ + ":" + std::to_string(port_); }
  httplib::Client client() const {
    httplib::Client c(host_, port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  ChildProcess& process() { return process_; }

 private:
  ChildProcess process_;
  std::string ready_, log_, host_;
  int port_ = 0;
  bool ok_ = false;
};

}  // namespace strata::testing
