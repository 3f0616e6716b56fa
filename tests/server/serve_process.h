// A `strata serve` child process for the server tests, ready to take requests.
#pragma once

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata::testing {

inline std::filesystem::path server_tmp_dir() { return std::filesystem::temp_directory_path() / "strata-server-tests"; }

class ServeProcess {
 public:
  ServeProcess(std::vector<std::string> args, const std::string& name) {
    namespace fs = std::filesystem;
    fs::create_directories(server_tmp_dir());
    ready_ = (server_tmp_dir() / (name + ".ready")).string();
    log_ = (server_tmp_dir() / (name + ".log")).string();
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
