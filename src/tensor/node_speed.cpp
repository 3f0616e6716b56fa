#include "tensor/node_speed.h"

#include <fcntl.h>
#include <immintrin.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>

#include "base/system.h"
#include "tensor/aligned_buffer.h"
#include "tensor/decode_rates.h"
#include "tensor/matmul.h"
#include "tensor/quantize_weights.h"
#include "tensor/repack.h"
#include "tensor/thread_pool.h"

namespace strata::tensor {
namespace {

// Bytes each step of the shared walk reads: large enough that the pool's per-step cost vanishes,
// small enough that a thread done early steals a useful share.
constexpr size_t kStepBytes = size_t{256} << 10;

uint64_t sum_words(const uint8_t* data, size_t bytes) {
  const uint64_t* p = reinterpret_cast<const uint64_t*>(data);
  uint64_t s[8] = {};
  for (size_t i = 0; i + 8 <= bytes / 8; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += p[i + j];
  }
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

// 256-bit loads into eight independent sums (no add chain holds the loads back).
__attribute__((target("avx2"))) uint64_t sum_words_avx2(const uint8_t* data, size_t bytes) {
  __m256i s[8];
  for (auto& v : s) v = _mm256_setzero_si256();
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
    for (int j = 0; j < 8; ++j) {
      s[j] = _mm256_add_epi64(s[j], _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 32 * j)));
    }
  }
  for (int j = 1; j < 8; ++j) s[0] = _mm256_add_epi64(s[0], s[j]);
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), s[0]);
  return out[0] + out[1] + out[2] + out[3];
}

// 512-bit loads (as the AVX-512 decode kernels read), eight independent sums, four cache lines a
// step.
__attribute__((target("avx512f"))) uint64_t sum_words_avx512(const uint8_t* data, size_t bytes) {
  __m512i s[8];
  for (auto& v : s) v = _mm512_setzero_si512();
  for (size_t i = 0; i + 512 <= bytes; i += 512) {
    for (int j = 0; j < 8; ++j) {
      s[j] = _mm512_add_epi64(s[j], _mm512_load_si512(reinterpret_cast<const void*>(data + i + 64 * j)));
    }
  }
  for (int j = 1; j < 8; ++j) s[0] = _mm512_add_epi64(s[0], s[j]);
  alignas(64) uint64_t out[8];  // not _mm512_reduce_add_epi64: GCC 12 warns inside it (bug 105593)
  _mm512_store_si512(out, s[0]);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

using SumFn = uint64_t (*)(const uint8_t*, size_t);

SumFn widest_sum() {
  if (__builtin_cpu_supports("avx512f")) return sum_words_avx512;
  if (__builtin_cpu_supports("avx2")) return sum_words_avx2;
  return sum_words;
}

bool has_type(const std::vector<DType>& types, DType t) { return std::find(types.begin(), types.end(), t) != types.end(); }

bool has_rate(const std::vector<std::pair<DType, double>>& rates, DType t) {
  return std::any_of(rates.begin(), rates.end(), [&](const auto& r) { return r.first == t; });
}

struct FreeBuffer {
  void operator()(uint8_t* p) const { std::free(p); }
};

}  // namespace

Result<double> measure_read_bandwidth(int32_t threads, uint64_t bytes, int32_t runs) {
  if (threads < 1 || threads > 1024) return make_error("bandwidth probe: {} threads out of range 1..1024", threads);
  if (bytes < kStepBytes || bytes > (uint64_t{64} << 30)) {
    return make_error("bandwidth probe: {} bytes out of range {}..64 GiB", bytes, kStepBytes);
  }
  if (runs < 1 || runs > 1000) return make_error("bandwidth probe: {} runs out of range 1..1000", runs);
  const size_t steps = static_cast<size_t>(bytes / kStepBytes);
  const size_t size = steps * kStepBytes;
  std::unique_ptr<uint8_t, FreeBuffer> buf(static_cast<uint8_t*>(std::aligned_alloc(4096, size)));
  if (!buf) return make_error("bandwidth probe: cannot allocate {} bytes", size);
  tensor::ThreadPool pool(threads);
  const auto walk = [&](const std::function<void(uint8_t*, size_t)>& step) {
    pool.parallel_for_shares(static_cast<int64_t>(steps), 1, [&](int64_t s0, int64_t s1) {
      step(buf.get() + static_cast<size_t>(s0) * kStepBytes, static_cast<size_t>(s1 - s0) * kStepBytes);
    });
  };
  // Faults the pages in, each on the thread whose share it is, before any timing.
  walk([](uint8_t* p, size_t n) { std::memset(p, 1, n); });
  const SumFn sum = widest_sum();
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int32_t run = 0; run < runs; ++run) {
    const auto start = std::chrono::steady_clock::now();
    // Each thread streams its own contiguous share as the decode kernels do (parallel_for_shares).
    walk([&](uint8_t* p, size_t n) { sink.fetch_add(sum(p, n), std::memory_order_relaxed); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s > 0) best = std::max(best, static_cast<double>(size) / s);
  }
  if (sink.load() != static_cast<uint64_t>(runs) * (size / 8) * 0x0101010101010101ull) {
    return make_error("bandwidth probe: the buffer read back wrong");  // also keeps the sums alive
  }
  return best;
}

namespace {

// Well beyond any cache of the machines this runs on, so the products stream from memory.
constexpr uint64_t kProductBytes = uint64_t{96} << 20;
constexpr int64_t kProductCols = 4096;
constexpr double kMaxRate = 1e13;  // 10 TB/s: beyond any CPU's memory

// A `type` matrix of about kProductBytes in `buf` (allocated once, so its pages are faulted in once
// for every type): one 16-row group of quantized random values (repacked where this process repacks),
// repeated. Values do not change the speed; rows only need to be valid blocks.
struct TestMatrix {
  MatrixView view;
  uint64_t gguf_bytes = 0;
};

TestMatrix test_matrix(DType type, const AlignedBuffer& buf, size_t capacity) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t row = row_bytes(type, kProductCols);
  std::vector<uint8_t> group(row * kRepackRows);
  std::vector<float> x(kProductCols);
  for (int64_t r = 0; r < kRepackRows; ++r) {
    for (float& v : x) v = dist(rng);
    quantize_row(type, x.data(), group.data() + static_cast<size_t>(r) * row, kProductCols);
  }
  const int64_t groups = std::max<int64_t>(1, static_cast<int64_t>(kProductBytes / group.size()));
  MatrixView one{type, kProductCols, kRepackRows, group.data(), row, false};
  size_t stride = row;
  std::vector<uint8_t> packed;
  if (repacks(type, kRepackRows, kProductCols)) {
    stride = repacked_row_bytes(type, kProductCols);
    packed.resize(stride * kRepackRows);
    repack_groups(one, packed.data(), 0, 1);
  }
  const std::vector<uint8_t>& unit = packed.empty() ? group : packed;
  const int64_t fit = std::min<int64_t>(groups, static_cast<int64_t>(capacity / unit.size()));
  for (int64_t g = 0; g < fit; ++g) std::memcpy(buf.get() + static_cast<size_t>(g) * unit.size(), unit.data(), unit.size());
  return {{type, kProductCols, fit * kRepackRows, buf.get(), stride, !packed.empty()},
          static_cast<uint64_t>(fit) * group.size()};
}

// GGUF bytes per second of one-token products of `type`: the median pass over at least `seconds` of
// wall time (a pass that another process or a quota period boundary slowed does not move it).
double product_rate(DType type, const AlignedBuffer& buf, size_t capacity, ThreadPool& pool, double seconds) {
  const TestMatrix m = test_matrix(type, buf, capacity);
  std::vector<float> x(kProductCols, 0.5f), y(static_cast<size_t>(m.view.rows));
  QuantizedActivations act;
  act.quantize(type, x.data(), 1, kProductCols, pool);
  matmul(m.view.slice_rows(0, std::min<int64_t>(m.view.rows, 256 * kRepackRows)), act, 1, y.data(), m.view.rows,
         pool);  // warm-up: threads awake
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::vector<double> pass_seconds;
  for (auto at = start; pass_seconds.empty() || std::chrono::duration<double>(at - start).count() < seconds;) {
    matmul(m.view, act, 1, y.data(), m.view.rows, pool);
    const auto end = Clock::now();
    pass_seconds.push_back(std::chrono::duration<double>(end - at).count());
    at = end;
  }
  std::nth_element(pass_seconds.begin(), pass_seconds.begin() + pass_seconds.size() / 2, pass_seconds.end());
  return static_cast<double>(m.gguf_bytes) / pass_seconds[pass_seconds.size() / 2];
}

}  // namespace

const std::vector<DType>& measured_types() {
  static const std::vector<DType> types = {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0,
                                           DType::Q4_K, DType::Q5_K, DType::Q6_K};
  return types;
}

double NodeSpeed::seconds(DType type, uint64_t bytes) const {
  double slowest = 0;
  for (const auto& [t, rate] : product_rates) {
    if (t == type) return static_cast<double>(bytes) / rate;
    slowest = slowest == 0 ? rate : std::min(slowest, rate);
  }
  return slowest > 0 ? static_cast<double>(bytes) / slowest : 0;
}

double NodeSpeed::slice_seconds(DType type, uint64_t bytes) const {
  for (const auto& [t, rate] : slice_rates) {
    if (t == type) return static_cast<double>(bytes) / rate;
  }
  return seconds(type, bytes);
}

double NodeSpeed::attention_seconds(int64_t positions, int64_t kv_heads, int64_t dk_plus_dv, int64_t group) const {
  const double elements = static_cast<double>(positions) * static_cast<double>(kv_heads) * static_cast<double>(dk_plus_dv);
  return elements * (layer_work.kv_element + static_cast<double>(group) * layer_work.kv_query_element);
}

double NodeSpeed::recurrent_seconds(int64_t state_elements) const {
  return static_cast<double>(state_elements) * layer_work.state_element;
}

std::string NodeSpeed::text() const {
  if (!known()) return "not measured";
  std::string rates;
  for (const auto& [t, rate] : product_rates) {
    rates += fmt::format("{}{} {:.1f}{}", rates.empty() ? "" : ", ", dtype_name(t), rate / 1e9, has_type(decoded, t) ? " (decoded)" : "");
  }
  std::string s = fmt::format("read {:.1f} GB/s; one-token products {} GB/s", read_bandwidth / 1e9, rates);
  if (!slice_rates.empty()) {
    std::string slices;
    for (const auto& [t, rate] : slice_rates) slices += fmt::format("{}{} {:.1f}", slices.empty() ? "" : ", ", dtype_name(t), rate / 1e9);
    s += fmt::format("; tensor-split slices {} GB/s (decoded)", slices);
  }
  if (layer_work.known()) {
    s += fmt::format("; attention {:.3f} ns per cached K/V element + {:.3f} per query head; delta rule {:.3f} ns per "
                     "state element",
                     1e9 * layer_work.kv_element, 1e9 * layer_work.kv_query_element, 1e9 * layer_work.state_element);
  }
  return s;
}

Status NodeSpeed::validate() const {
  const auto bad = [](double v) { return !std::isfinite(v) || v <= 0 || v > kMaxRate; };
  if (read_bandwidth != 0 && bad(read_bandwidth)) return make_error("node speed: read bandwidth {} out of range", read_bandwidth);
  const LayerWork& w = layer_work;
  for (const auto& [value, name] : {std::pair{w.kv_element, "attention seconds per element"},
                                    std::pair{w.kv_query_element, "attention seconds per element and query head"},
                                    std::pair{w.state_element, "delta rule seconds per state element"}}) {
    // A millisecond per element is beyond any CPU; 0 means not measured.
    if (!std::isfinite(value) || value < 0 || value > 1e-3) return make_error("node speed: {} {} out of range", name, value);
  }
  for (const auto* list : {&product_rates, &slice_rates}) {
    if (list->size() > 64) return make_error("node speed: {} rates is too many", list->size());
    for (size_t i = 0; i < list->size(); ++i) {
      const auto& [type, rate] = (*list)[i];
      if (!dtype_info(static_cast<int32_t>(type))) return make_error("node speed: type {} unknown", static_cast<int32_t>(type));
      if (bad(rate)) return make_error("node speed: {} rate {} out of range", dtype_name(type), rate);
      for (size_t j = 0; j < i; ++j) {
        if ((*list)[j].first == type) return make_error("node speed: {} listed twice", dtype_name(type));
      }
    }
  }
  for (DType t : decoded) {
    if (!has_rate(product_rates, t)) return make_error("node speed: {} marked decoded has no rate", dtype_name(t));
  }
  return {};
}

Result<NodeSpeed> measure_product_speed(int32_t threads, double seconds_per_type) {
  if (threads < 1 || threads > 1024) return make_error("node speed: {} threads out of range 1..1024", threads);
  ThreadPool pool(threads);
  NodeSpeed s;
  // In 2 MiB pages like the engine's weights; repacked K-quants are up to 2.8% larger than the file's.
  const size_t capacity = kProductBytes + kProductBytes / 16;
  const AlignedBuffer buf = aligned_buffer(capacity);
  // Decoding streams weights with software prefetch on or off, whichever this host runs faster (the
  // stage runner calibrates on its weights at load): the rates are measured the same way.
  if (repacks(DType::Q4_K, kRepackRows, kProductCols)) {
    calibrate_decode_prefetch(test_matrix(DType::Q4_K, buf, capacity).view, pool);
  }
  for (DType t : measured_types()) s.product_rates.emplace_back(t, product_rate(t, buf, capacity, pool, seconds_per_type));
  STRATA_ASSIGN(s.read_bandwidth, measure_read_bandwidth(threads, kProductBytes, 5));
  STRATA_TRY(s.validate());
  return s;
}

namespace {

// The first processor's model name, family, model and stepping (/proc/cpuinfo): hosts sold under
// one name ("AMD EPYC") differ in generation.
std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = " unknown cpu", revision;
  while (std::getline(in, line) && !line.empty()) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string value = line.substr(colon + 1);
    if (line.rfind("model name", 0) == 0) name = value;
    else if (line.rfind("cpu family", 0) == 0 || line.rfind("stepping", 0) == 0) revision += value;
    else if (line.rfind("model", 0) == 0) revision += value;
  }
  return name + ";" + revision;
}

std::string memory_total() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  std::getline(in, line);  // "MemTotal:  N kB"
  return line.substr(line.find(':') + 1);
}

// FNV-1a, as a file name for the key.
std::string key_file(const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

// The seconds of decoded products behind a type's decoded rate (whole matrices or slices).
struct Evidence {
  DType type;
  bool slices;
  double seconds;
};

// "TYPE RATE", "TYPE RATE decoded SECONDS" for a rate decoding ran at, "slice TYPE RATE SECONDS" for a
// slice rate (SECONDS: the products' time behind it).
Status read_rate_line(const std::string& line, NodeSpeed& s, std::vector<Evidence>& evidence) {
  std::istringstream fields(line);
  std::string name, mark;
  double rate = 0, seconds = 0;
  const bool slice = line.rfind("slice ", 0) == 0;
  if (slice) fields >> mark;
  if (!(fields >> name >> rate)) return make_error("cached speed: bad product line");
  const auto type = dtype_from_name(name);
  if (!type) return make_error("cached speed: unknown type '{}'", name.substr(0, 32));
  (slice ? s.slice_rates : s.product_rates).emplace_back(*type, rate);
  bool decoded = slice;
  if (!slice && fields >> mark) {
    if (mark != "decoded") return make_error("cached speed: unknown mark '{}'", mark.substr(0, 32));
    s.decoded.push_back(*type);
    decoded = true;
  }
  std::string behind;
  if (decoded && fields >> behind) {
    char* end = nullptr;
    seconds = std::strtod(behind.c_str(), &end);
    if (*end || !std::isfinite(seconds) || seconds < 0 || seconds > 1e9) {
      return make_error("cached speed: bad seconds '{}' behind {}", behind.substr(0, 32), name);
    }
    evidence.push_back({*type, slice, seconds});
  }
  if (fields >> behind) return make_error("cached speed: '{}' after {}", behind.substr(0, 32), name);
  return {};
}

Result<NodeSpeed> read_speed(const std::string& path, const std::string& key, std::vector<Evidence>* evidence = nullptr) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line != key) return make_error("no cached speed");
  NodeSpeed s;
  std::string name;
  if (!(in >> name >> s.read_bandwidth) || name != "read") return make_error("cached speed: no read bandwidth");
  LayerWork& w = s.layer_work;
  if (!(in >> name >> w.kv_element >> w.kv_query_element) || name != "attention") return make_error("cached speed: no attention");
  if (!(in >> name >> w.state_element) || name != "recurrent") return make_error("cached speed: no recurrent state");
  std::getline(in, line);  // the rest of the "recurrent" line
  std::vector<Evidence> seen;
  for (int lines = 0; std::getline(in, line);) {
    if (line.empty()) continue;
    if (++lines > 2 * 64) return make_error("cached speed: more rate lines than types");
    STRATA_TRY(read_rate_line(line, s, seen));
  }
  for (DType t : measured_types()) {
    if (!has_rate(s.product_rates, t)) return make_error("cached speed: no {} rate", dtype_name(t));
  }
  STRATA_TRY(s.validate());
  if (evidence) *evidence = std::move(seen);
  return s;
}

double evidence_of(const std::vector<Evidence>& evidence, DType type, bool slices) {
  for (const Evidence& e : evidence) {
    if (e.type == type && e.slices == slices) return e.seconds;
  }
  return 0;
}

Status write_speed(const std::string& path, const std::string& key, const NodeSpeed& s, const std::vector<Evidence>& evidence = {}) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    const LayerWork& w = s.layer_work;
    out << key << "\nread " << fmt::format("{:.17g}", s.read_bandwidth) << "\n";
    out << fmt::format("attention {:.17g} {:.17g}\nrecurrent {:.17g}\n", w.kv_element, w.kv_query_element, w.state_element);
    for (const auto& [t, rate] : s.product_rates) {
      out << dtype_name(t) << " " << fmt::format("{:.17g}", rate);
      if (has_type(s.decoded, t)) {
        out << fmt::format(" decoded {:.6g}", evidence_of(evidence, t, false));
      }
      out << "\n";
    }
    for (const auto& [t, rate] : s.slice_rates) {
      out << fmt::format("slice {} {:.17g} {:.6g}\n", dtype_name(t), rate, evidence_of(evidence, t, true));
    }
    if (!out) return make_error("{}: cannot write", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return make_error("{}: cannot rename to {}", tmp, path);
  return {};
}

// Where the speed for one key lives: the file named for it and the directory's lock.
struct CacheEntry {
  std::string key;
  std::filesystem::path dir;
  std::string path;
  std::string lock() const { return (dir / ".lock").string(); }
};

CacheEntry cache_entry(int32_t threads, const std::string& cache_dir) {
  CacheEntry e{node_speed_key(threads), std::filesystem::path(cache_dir) / "node-speed", {}};
  e.path = (e.dir / key_file(e.key)).string();
  return e;
}

struct FileLock {
  int fd = -1;
  explicit FileLock(const std::string& path) : fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd >= 0) ::flock(fd, LOCK_EX);
  }
  ~FileLock() {
    if (fd >= 0) ::close(fd);  // releases the lock
  }
};

}  // namespace

std::string node_speed_key(int32_t threads) {
  std::string features;
  for (const std::string& f : kernel_features()) features += " " + f;
  return fmt::format("strata node speed v2; cpu{}; memory{}; kernels{}; threads {}; quota {:.3f} cores", cpu_identity(),
                     memory_total(), features, threads, cpu_quota_cores());
}

Result<NodeSpeed> cached_node_speed(int32_t threads, const std::string& cache_dir, const SpeedProbe& measure) {
  const CacheEntry entry = cache_entry(threads, cache_dir);
  std::error_code ec;
  std::filesystem::create_directories(entry.dir, ec);
  if (ec) return measure(threads);  // no cache: measure every start
  FileLock lock(entry.lock());
  if (auto cached = read_speed(entry.path, entry.key); cached.ok()) {
    cached->from_cache = true;
    return cached;
  }
  STRATA_ASSIGN(NodeSpeed s, measure(threads));
  STRATA_TRY(s.validate());
  (void)write_speed(entry.path, entry.key, s);  // a cache that cannot be written only costs the next start a measurement
  return s;
}

Result<NodeSpeed> read_cached_node_speed(int32_t threads, const std::string& cache_dir) {
  const CacheEntry entry = cache_entry(threads, cache_dir);
  FileLock lock(entry.lock());
  STRATA_ASSIGN(NodeSpeed s, read_speed(entry.path, entry.key));
  s.from_cache = true;
  return s;
}

Result<std::vector<DecodedProducts>> fold_decoded_rates(int32_t threads, const std::string& cache_dir,
                                                        const std::vector<DecodedProducts>& products, double min_seconds) {
  // A run's products weigh against at most this much of the earlier ones: one slow run (another
  // process on the host) moves the rate by a part, and a changed host is learned in a few runs.
  constexpr double kEarlierSeconds = 10;
  const CacheEntry entry = cache_entry(threads, cache_dir);
  std::vector<DecodedProducts> folded;
  if (!std::filesystem::exists(entry.path)) return folded;
  FileLock lock(entry.lock());
  std::vector<Evidence> evidence;
  STRATA_ASSIGN(NodeSpeed s, read_speed(entry.path, entry.key, &evidence));
  for (const DecodedProducts& p : products) {
    if (p.seconds < min_seconds || !(p.rate() > 0) || p.rate() > kMaxRate) continue;
    auto& rates = p.slices ? s.slice_rates : s.product_rates;
    auto it = std::find_if(rates.begin(), rates.end(), [&](const auto& r) { return r.first == p.type; });
    if (it == rates.end()) it = rates.insert(rates.end(), {p.type, 0.0});
    auto e = std::find_if(evidence.begin(), evidence.end(), [&](const Evidence& x) { return x.type == p.type && x.slices == p.slices; });
    if (e == evidence.end()) e = evidence.insert(evidence.end(), {p.type, p.slices, 0.0});  // the probe's rate: replaced
    const double earlier = std::min(e->seconds, kEarlierSeconds);
    it->second = (it->second * earlier + static_cast<double>(p.bytes)) / (earlier + p.seconds);
    e->seconds = earlier + p.seconds;
    if (!p.slices && !has_type(s.decoded, p.type)) s.decoded.push_back(p.type);
    folded.push_back({p.type, p.slices, static_cast<uint64_t>(it->second * e->seconds), e->seconds});
  }
  if (folded.empty()) return folded;
  STRATA_TRY(s.validate());
  STRATA_TRY(write_speed(entry.path, entry.key, s, evidence));
  return folded;
}

}  // namespace strata::tensor
