// The roofline's bandwidth probe (tensor::measure_read_bandwidth) beside the decode kernels'
// matmul_decode/* figures: it should read at least as fast as the best kernel at the same thread
// count, or `strata bench --roofline` would show decode above its bound.
//   ./strata_microbench --benchmark_filter='read_bandwidth|matmul_decode/.*(plain|repacked)'
#include <benchmark/benchmark.h>

#include "tensor/node_speed.h"

namespace strata {
namespace {

void bench_probe(benchmark::State& state) {
  double bytes_per_s = 0;
  for (auto _ : state) {
    auto r = tensor::measure_read_bandwidth(static_cast<int32_t>(state.range(0)));
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    bytes_per_s = *r;
  }
  state.counters["GB/s"] = bytes_per_s / 1e9;
}

BENCHMARK(bench_probe)->Name("read_bandwidth/probe")->Arg(1)->Arg(2)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace strata
