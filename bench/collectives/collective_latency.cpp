// Latency of the exchanges tensor parallelism needs per layer (issue 14): an all-reduce (sum of
// floats) and an all-gather of 4-16 KB between two processes, through each candidate transport:
//   tcp   one TCP connection per pair of ranks, TCP_NODELAY, each side sends then receives
//   gloo  Gloo's allreduce / allgather over its TCP transport (rendezvous through a FileStore)
//   ucx   UCX's tag send / receive between two workers (UCX has no collectives of its own; the
//         exchange is the tcp one's), transports chosen by UCX_TLS
//   mpi   MPI_Allreduce / MPI_Allgather (Open MPI; its transports are chosen by mpirun's --mca)
// Usage: collective_latency BACKEND RANK DIR [ITERATIONS]   (mpi: under mpirun, RANK ignored)
// DIR is a directory both ranks share for the rendezvous. Rank 0 prints one line per operation and
// size: median, 90th and 99th percentile in microseconds over ITERATIONS (default 2000) after 200
// untimed ones, and checks every result (a wrong sum or gather exits 1).
// bench/collectives.sh installs the packages, builds this and runs every backend.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings need libmpi_cxx)
#include <mpi.h>
#include <ucp/api/ucp.h>

namespace {

// One backend: exchange(send, bytes, recv) gives the other rank's `bytes` in recv; allreduce and
// allgather are either built on it or the library's own.
struct Backend {
  std::function<void(std::vector<float>& in, std::vector<float>& out)> allreduce;
  std::function<void(std::vector<float>& in, std::vector<float>& out)> allgather;
};

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

void write_file(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary) << data;
  std::rename(tmp.c_str(), path.c_str());
}

std::string wait_file(const std::string& path) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream f(path, std::ios::binary);
    if (f) return std::string(std::istreambuf_iterator<char>(f), {});
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fail("timed out waiting for " + path);
}

// Builds allreduce / allgather for two ranks from a pairwise exchange of raw bytes.
Backend from_exchange(int rank, std::function<void(const void*, size_t, void*)> exchange) {
  Backend b;
  b.allreduce = [exchange](std::vector<float>& in, std::vector<float>& out) {
    exchange(in.data(), in.size() * sizeof(float), out.data());
    for (size_t i = 0; i < in.size(); ++i) out[i] += in[i];
  };
  b.allgather = [exchange, rank](std::vector<float>& in, std::vector<float>& out) {
    const size_t n = in.size();
    std::memcpy(out.data() + rank * n, in.data(), n * sizeof(float));
    exchange(in.data(), n * sizeof(float), out.data() + (1 - rank) * n);
  };
  return b;
}

Backend tcp_backend(int rank, const std::string& dir) {
  int fd = -1;
  if (rank == 0) {
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(ls, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(ls, 1) != 0) fail("tcp: bind/listen");
    getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
    write_file(dir + "/tcp_port", std::to_string(ntohs(a.sin_port)));
    fd = accept(ls, nullptr, nullptr);
    close(ls);
  } else {
    const int port = std::stoi(wait_file(dir + "/tcp_port"));
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fail("tcp: connect");
  }
  if (fd < 0) fail("tcp: no connection");
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Both sides send first: 16 KB fits the socket buffers, so neither blocks before it receives.
  return from_exchange(rank, [fd](const void* send, size_t bytes, void* recv) {
    for (size_t done = 0; done < bytes;) {
      const ssize_t k = ::send(fd, static_cast<const char*>(send) + done, bytes - done, 0);
      if (k <= 0) fail("tcp: send");
      done += static_cast<size_t>(k);
    }
    for (size_t done = 0; done < bytes;) {
      const ssize_t k = ::recv(fd, static_cast<char*>(recv) + done, bytes - done, 0);
      if (k <= 0) fail("tcp: recv");
      done += static_cast<size_t>(k);
    }
  });
}

Backend gloo_backend(int rank, const std::string& dir) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  context->connectFullMesh(store, device);
  Backend b;
  b.allreduce = [context](std::vector<float>& in, std::vector<float>& out) {
    gloo::AllreduceOptions opts(context);
    opts.setInput(in.data(), in.size());
    opts.setOutput(out.data(), out.size());
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  };
  b.allgather = [context](std::vector<float>& in, std::vector<float>& out) {
    gloo::AllgatherOptions opts(context);
    opts.setInput(in.data(), in.size());
    opts.setOutput(out.data(), out.size());
    gloo::allgather(opts);
  };
  return b;
}

struct Ucx {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
};

void ucx_wait(ucp_worker_h worker, ucs_status_ptr_t req) {
  if (req == nullptr) return;
  if (UCS_PTR_IS_ERR(req)) fail("ucx: request failed");
  while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker);
  if (ucp_request_check_status(req) != UCS_OK) fail("ucx: request failed");
  ucp_request_free(req);
}

Backend ucx_backend(int rank, const std::string& dir) {
  auto u = std::make_shared<Ucx>();
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  if (ucp_init(&params, nullptr, &u->context) != UCS_OK) fail("ucx: ucp_init");
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (ucp_worker_create(u->context, &wp, &u->worker) != UCS_OK) fail("ucx: ucp_worker_create");
  ucp_address_t* address = nullptr;
  size_t address_len = 0;
  if (ucp_worker_get_address(u->worker, &address, &address_len) != UCS_OK) fail("ucx: get_address");
  write_file(dir + "/ucx_" + std::to_string(rank), std::string(reinterpret_cast<char*>(address), address_len));
  ucp_worker_release_address(u->worker, address);
  const std::string peer = wait_file(dir + "/ucx_" + std::to_string(1 - rank));
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = reinterpret_cast<const ucp_address_t*>(peer.data());
  if (ucp_ep_create(u->worker, &ep, &u->ep) != UCS_OK) fail("ucx: ucp_ep_create");
  return from_exchange(rank, [u](const void* send, size_t bytes, void* recv) {
    ucp_request_param_t p{};
    ucs_status_ptr_t r = ucp_tag_recv_nbx(u->worker, recv, bytes, 7, ~ucp_tag_t{0}, &p);
    ucs_status_ptr_t s = ucp_tag_send_nbx(u->ep, send, bytes, 7, &p);
    ucx_wait(u->worker, s);
    ucx_wait(u->worker, r);
  });
}

Backend mpi_backend() {
  Backend b;
  b.allreduce = [](std::vector<float>& in, std::vector<float>& out) {
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(in.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  };
  b.allgather = [](std::vector<float>& in, std::vector<float>& out) {
    MPI_Allgather(in.data(), static_cast<int>(in.size()), MPI_FLOAT, out.data(), static_cast<int>(in.size()), MPI_FLOAT,
                  MPI_COMM_WORLD);
  };
  return b;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// Times `iterations` calls of op on `bytes` of output; values are small integers, so sums are exact.
bool measure(const char* backend, const char* name, int rank, size_t bytes, int iterations,
             const std::function<void(std::vector<float>&, std::vector<float>&)>& op, bool gather) {
  const size_t n_out = bytes / sizeof(float), n_in = gather ? n_out / 2 : n_out;
  std::vector<float> in(n_in), out(n_out);
  std::vector<double> us;
  for (int it = -200; it < iterations; ++it) {
    for (size_t i = 0; i < n_in; ++i) in[i] = static_cast<float>((i + static_cast<size_t>(it) * 3 + rank * 7) % 1000);
    const auto t0 = std::chrono::steady_clock::now();
    op(in, out);
    const auto t1 = std::chrono::steady_clock::now();
    if (it >= 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    for (size_t i = 0; i < n_out; ++i) {
      const size_t j = gather ? i % n_in : i;
      const int r = gather ? static_cast<int>(i / n_in) : -1;
      const auto value = [&](int rr) { return static_cast<float>((j + static_cast<size_t>(it) * 3 + rr * 7) % 1000); };
      const float want = gather ? value(r) : value(0) + value(1);
      if (out[i] != want) {
        std::fprintf(stderr, "%s %s: element %zu is %g, expected %g\n", backend, name, i, out[i], want);
        return false;
      }
    }
  }
  if (rank == 0) {
    std::printf("%-5s %-9s %6zu B  median %7.1f us  p90 %7.1f  p99 %7.1f\n", backend, name, bytes, percentile(us, 0.5),
                percentile(us, 0.9), percentile(us, 0.99));
    std::fflush(stdout);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s tcp|gloo|ucx|mpi RANK DIR [ITERATIONS]\n", argv[0]);
    return 2;
  }
  const std::string backend = argv[1];
  int rank = std::atoi(argv[2]);
  const std::string dir = argc > 3 ? argv[3] : ".";
  const int iterations = argc > 4 ? std::atoi(argv[4]) : 2000;
  try {
    Backend b;
    if (backend == "mpi") {
      MPI_Init(&argc, &argv);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      b = mpi_backend();
    } else if (backend == "tcp") {
      b = tcp_backend(rank, dir);
    } else if (backend == "gloo") {
      b = gloo_backend(rank, dir);
    } else if (backend == "ucx") {
      b = ucx_backend(rank, dir);
    } else {
      std::fprintf(stderr, "unknown backend %s\n", backend.c_str());
      return 2;
    }
    bool ok = true;
    for (const size_t bytes : {4096, 8192, 16384}) {
      ok = ok && measure(backend.c_str(), "allreduce", rank, bytes, iterations, b.allreduce, false);
      ok = ok && measure(backend.c_str(), "allgather", rank, bytes, iterations, b.allgather, true);
    }
    if (backend == "mpi") MPI_Finalize();
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s rank %d: %s\n", backend.c_str(), rank, e.what());
    return 1;
  }
}
