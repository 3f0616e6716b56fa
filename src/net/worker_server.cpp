// Starting and stopping a worker process.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <thread>

#include "base/system.h"
#include "model/layer_speed.h"
#include "net/worker_service.h"
#include "tensor/decode_rates.h"

namespace strata::net {
namespace {

constexpr int kMaxCallThreads = 64;

}  // namespace

Status run_worker(const WorkerOptions& options) {
  if (options.port < 0 || options.port > 65535) return make_error("port {} out of range 0..65535", options.port);
  if (options.session_timeout_s < 1) return make_error("session timeout must be at least 1 s");
  if (options.max_sessions < 1) return make_error("--max-sessions must be at least 1");
  if (!is_loopback_host(options.host) && options.security.token.empty() && !options.insecure) {
    return make_error("refusing to listen on {} without a token: give --token/--token-file, or --insecure to accept "
                      "anyone who can reach the port",
                      options.host);
  }
  // Block termination signals in every thread (gRPC starts its own as soon as credentials exist,
  // and they inherit the mask); one thread waits for them and shuts the server down.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  STRATA_ASSIGN(auto creds, server_credentials(options.security));
  ::signal(SIGPIPE, SIG_IGN);  // a coordinator that hangs up must not kill the worker

  // The speed the planner will read from Hello: this host's, measured before serving (a few seconds,
  // once per host, thread count and CPU quota) so that no call waits for it.
  WorkerOptions with_speed = options;
  const int32_t threads = options.threads > 0 ? options.threads : hardware_threads();
  STRATA_ASSIGN(with_speed.speed, model::cached_node_speed(threads, options.speed_cache_dir));
  spdlog::info("worker: speed with {} threads ({}): {}", threads,
               with_speed.speed.from_cache ? "cached for this host" : "measured now", with_speed.speed.text());
  with_speed.speed_from_cache = true;
  // Decoding's own product rates go into that cache as they run, for the next plan.
  const tensor::DecodeRateKeeper rate_keeper(threads, options.speed_cache_dir);
  WorkerService service(with_speed);
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string host = options.host.find(':') != std::string::npos && options.host.front() != '['
                               ? "[" + options.host + "]" : options.host;
  builder.AddListeningPort(host + ":" + std::to_string(options.port), creds, &port);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.SetMaxSendMessageSize(kMaxReplyBytes);
  // Bounds what unauthenticated peers can make the worker hold: at most this many calls at once,
  // each with one message of at most kMaxRequestBytes.
  grpc::ResourceQuota quota("strata-worker");
  quota.SetMaxThreads(kMaxCallThreads);
  quota.Resize(kMaxCallThreads * size_t{kMaxRequestBytes});
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxCallThreads);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) return make_error("cannot listen on {}:{}", options.host, options.port);
  const MemoryFacts mem = read_memory_facts();
  spdlog::info("worker: {} threads, memory limit {} MiB{}, available {} MiB, token {}, TLS {}",
               options.threads > 0 ? options.threads : hardware_threads(), mem.limit >> 20,
               mem.cgroup_limited ? " (cgroup)" : "", mem.available >> 20,
               options.security.token.empty() ? "off" : "on", options.security.tls_cert.empty() ? "off" : "on");
  std::printf("strata worker listening on %s:%d\n", options.host.c_str(), port);
  std::fflush(stdout);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("worker: signal {}, shutting down", sig);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  });
  server->Wait();
  waiter.join();
  return {};
}

}  // namespace strata::net
