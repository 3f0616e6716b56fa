// Sampler chain with llama.cpp's semantics (src/llama-sampler.cpp, common/sampling.cpp):
//   penalties -> top_k -> top_p -> min_p -> temperature -> dist.
// Float arithmetic follows the reference (float softmax for top_p, double running sum for dist,
// one uniform double per draw from std::mt19937, no draw when one candidate is left) so that a
// seed gives the same tokens. Where the reference leaves the order of equal logits unspecified,
// the lower id goes first.
#include "sampling/sampler.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <limits>

namespace strata::sampling {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Descending logit; ties broken by ascending id. A function object so the algorithms inline it.
struct Before {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};
constexpr Before before{};

using Cands = std::span<Candidate>;

float clean(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// Index of the first maximum (NaN ignored; 0 if there is none). Eight independent running maxima
// keep the loop free of a serial dependency, then a search finds the first index holding the max.
size_t argmax(std::span<const float> x) {
  float lane[8];
  std::fill(std::begin(lane), std::end(lane), kNegInf);
  size_t i = 0;
  for (; i + 8 <= x.size(); i += 8) {
    for (size_t j = 0; j < 8; ++j) lane[j] = lane[j] < x[i + j] ? x[i + j] : lane[j];
  }
  float m = kNegInf;
  for (float l : lane) m = m < l ? l : m;
  for (; i < x.size(); ++i) m = m < x[i] ? x[i] : m;
  const size_t at = static_cast<size_t>(std::find(x.begin(), x.end(), m) - x.begin());
  return at < x.size() ? at : 0;
}

// Moves the `k` best of c[first..] to c[first..first+k), sorted; the rest stay behind them in
// unspecified order. Heap selection (partial_sort) is ~n compares when k is small against the
// range; otherwise nth_element then sort.
void select_sorted(Cands c, size_t first, size_t k) {
  const auto begin = c.begin() + static_cast<ptrdiff_t>(first);
  const size_t n = c.size() - first;
  k = std::min(k, n);
  if (k == 0) return;
  const auto mid = begin + static_cast<ptrdiff_t>(k);
  if (k * 32 <= n) {
    std::partial_sort(begin, mid, c.end(), before);
    return;
  }
  if (k < n) std::nth_element(begin, mid - 1, c.end(), before);
  std::sort(begin, mid, before);
}

float max_logit(Cands c) {
  float m = kNegInf;
  for (const auto& x : c) m = std::max(m, x.logit);
  return m;
}

uint32_t draw_seed(uint32_t requested) {
  if (requested != kRandomSeed) return requested;
  // As in llama.cpp: the clock stands in when std::random_device is a deterministic PRNG.
  std::random_device rd;
  if (rd.entropy() == 0) {
    return static_cast<uint32_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
  return rd();
}

// Repeat / frequency / presence penalties on the tokens seen in the window, addressed by id.
void apply_penalties(std::span<float> logits, const std::unordered_map<int32_t, int32_t>& counts, const Params& p) {
  if (p.penalty_last_n == 0) return;
  if (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) return;
  for (const auto& [token, count] : counts) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size() || count <= 0) continue;
    float& l = logits[static_cast<size_t>(token)];
    // Dividing a negative logit would raise its probability; multiply those instead.
    if (l <= 0.0f) {
      l *= p.repeat_penalty;
    } else {
      l /= p.repeat_penalty;
    }
    l -= static_cast<float>(count) * p.frequency_penalty + static_cast<float>(count > 0) * p.presence_penalty;
  }
}

// The k highest logits, sorted, straight from the logit row: a heap of the k best so far whose
// worst entry is the bar to beat. Ids arrive in increasing order, so an equal logit never beats
// the bar (lower id wins), and the common case is one float compare per token.
size_t select_top_k(std::span<const float> logits, size_t k, Candidate* out) {
  k = std::min(k, logits.size());
  if (k == 0) return 0;
  // (A NaN fails every `>` below, so only the first k need cleaning.)
  for (size_t i = 0; i < k; ++i) out[i] = Candidate{static_cast<int32_t>(i), clean(logits[i]), 0.0f};
  std::make_heap(out, out + k, before);  // front = worst of the k
  float bar = out[0].logit;
  for (size_t i = k; i < logits.size(); ++i) {
    if (logits[i] > bar) {
      std::pop_heap(out, out + k, before);
      out[k - 1] = Candidate{static_cast<int32_t>(i), logits[i], 0.0f};
      std::push_heap(out, out + k, before);
      bar = out[0].logit;
    }
  }
  std::sort_heap(out, out + k, before);
  return k;
}

// Keeps the smallest prefix (by descending probability) whose probability mass reaches p; the
// softmax is over the current candidates, untempered. Returns the new size.
size_t apply_top_p(Cands c, float p, bool& sorted) {
  if (p >= 1.0f || c.empty()) return c.size();

  // Probabilities in the current order (the float normalizer depends on summation order).
  const float m = sorted ? c[0].logit : max_logit(c);
  float sum = 0.0f;
  for (auto& x : c) {
    x.p = std::exp(x.logit - m);
    sum += x.p;
  }
  for (auto& x : c) x.p /= sum;

  // Sort lazily: a small head usually suffices; when it falls short, sort the next block of the
  // remainder (everything there ranks below the head), growing geometrically.
  size_t ready = c.size();
  if (!sorted) {
    ready = c.size() > 1024 ? size_t{256} : c.size();
    select_sorted(c, 0, ready);
  }
  float cum = 0.0f;
  size_t keep = c.size();
  for (size_t i = 0; i < c.size(); ++i) {
    if (i == ready) {
      const size_t grow = std::min(c.size() - ready, ready * 4);
      select_sorted(c, ready, grow);
      ready += grow;
    }
    cum += c[i].p;
    if (cum >= p) {
      keep = i + 1;
      break;
    }
  }
  // Everything walked over was sorted first, so the kept prefix is sorted.
  sorted = true;
  return keep;
}

// Keeps candidates whose probability is at least p times the best one's: logit >= max + ln(p).
// A stable filter, so a sorted list stays sorted. Returns the new size.
size_t apply_min_p(Cands c, float p, bool sorted) {
  if (p <= 0.0f || c.empty()) return c.size();
  const float threshold = (sorted ? c[0].logit : max_logit(c)) + std::log(p);
  size_t out = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].logit >= threshold) c[out++] = c[i];
  }
  return out > 0 ? out : c.size();  // the best always passes unless p > 1
}

// Draws from softmax(c) with one uniform double; leaves the normalized probabilities in p.
size_t draw(Cands c, std::mt19937& rng) {
  if (c.size() == 1) {  // no draw, as in the reference
    c[0].p = 1.0f;
    return 0;
  }
  const float m = max_logit(c);
  double sum = 0.0;
  for (auto& x : c) {
    x.p = std::exp(x.logit - m);
    sum += x.p;
  }
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const double target = sum * uniform(rng);
  double run = 0.0;
  size_t chosen = c.size();
  for (size_t i = 0; i < c.size(); ++i) {
    if (chosen == c.size()) {
      run += c[i].p;
      if (run >= target) chosen = i;
    }
    c[i].p = static_cast<float>(c[i].p / sum);
  }
  return chosen == c.size() ? c.size() - 1 : chosen;
}

}  // namespace

Status validate(const Params& p) {
  if (!std::isfinite(p.temp)) return make_error("temp must be a finite number, got {}", p.temp);
  if (!(p.top_p >= 0.0f && p.top_p <= 1.0f)) return make_error("top_p must be in [0, 1], got {}", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return make_error("min_p must be in [0, 1], got {}", p.min_p);
  if (p.penalty_last_n < -1) {
    return make_error("penalty_last_n must be >= -1 (-1: whole history, 0: off), got {}", p.penalty_last_n);
  }
  if (!(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f)) {
    return make_error("repeat_penalty must be a finite number > 0 (1: off), got {}", p.repeat_penalty);
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return make_error("frequency_penalty must be a finite number, got {}", p.frequency_penalty);
  }
  if (!std::isfinite(p.presence_penalty)) {
    return make_error("presence_penalty must be a finite number, got {}", p.presence_penalty);
  }
  return ok_status();
}

Sampler::Sampler(const Params& params, int32_t n_vocab)
    : params_(params), n_vocab_(std::max(n_vocab, 0)), seed_(draw_seed(params.seed)), rng_(seed_) {
  logits_.resize(static_cast<size_t>(n_vocab_));
  cur_.resize(static_cast<size_t>(n_vocab_));
}

void Sampler::accept(int32_t token) {
  const int32_t n = params_.penalty_last_n;
  if (n == 0) return;
  ++counts_[token];
  if (n < 0) return;  // whole history: counts only
  history_.push_back(token);
  if (history_.size() > static_cast<size_t>(n)) {
    const int32_t old = history_.front();
    history_.pop_front();
    auto it = counts_.find(old);
    if (it != counts_.end() && --it->second == 0) counts_.erase(it);
  }
}

void Sampler::reset() {
  history_.clear();
  counts_.clear();
  n_cur_ = 0;
  seed_ = draw_seed(params_.seed);
  rng_.seed(seed_);
}

int32_t Sampler::sample(std::span<const float> in) {
  assert(in.size() == static_cast<size_t>(n_vocab_));
  const size_t n = std::min(in.size(), logits_.size());
  n_cur_ = 0;
  if (n == 0) return -1;

  // Working copy of the row for the penalties. A NaN logit (a broken model) must not reach the
  // sorts, whose orderings it would break: it is read as -inf wherever a candidate is made.
  std::span<float> logits(logits_.data(), n);
  std::copy_n(in.begin(), n, logits.begin());
  apply_penalties(logits, counts_, params_);

  if (params_.temp <= 0.0f) {
    // Greedy: the argmax survives every truncation, so skip them; the lowest id wins ties.
    const size_t best = argmax(logits);
    cur_[0] = Candidate{static_cast<int32_t>(best), clean(logits[best]), 1.0f};
    n_cur_ = 1;
    return cur_[0].id;
  }

  bool sorted = false;
  size_t size = n;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    size = select_top_k(logits, static_cast<size_t>(params_.top_k), cur_.data());
    sorted = true;
  } else {
    for (size_t i = 0; i < n; ++i) cur_[i] = Candidate{static_cast<int32_t>(i), clean(logits[i]), 0.0f};
    if (params_.top_k > 0) {  // k >= n keeps everything, sorted (as the reference does)
      std::sort(cur_.begin(), cur_.begin() + static_cast<ptrdiff_t>(n), before);
      sorted = true;
    }
  }
  size = apply_top_p(Cands(cur_.data(), size), params_.top_p, sorted);
  size = apply_min_p(Cands(cur_.data(), size), params_.min_p, sorted);
  Cands c(cur_.data(), size);
  for (auto& x : c) x.logit /= params_.temp;
  n_cur_ = size;
  return c[draw(c, rng_)].id;
}

int32_t candidates_needed(const Params& p, int32_t n_vocab) {
  const bool penalties = p.penalty_last_n != 0 &&
                         (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f);
  if (penalties) return 0;  // they change logits outside any top-k
  if (p.temp <= 0.0f) return 1;
  if (p.top_k <= 0 || p.top_k >= n_vocab) return 0;
  return p.top_k;
}

std::vector<Candidate> top_candidates(std::span<const float> logits, size_t k) {
  std::vector<Candidate> out(std::min(k, logits.size()));
  select_top_k(logits, out.size(), out.data());
  return out;
}

std::vector<Candidate> Sampler::top_logprobs(std::span<const float> logits, int n) {
  std::vector<Candidate> out;
  if (n <= 0 || logits.empty()) return out;
  float m = kNegInf;
  for (float l : logits) {
    if (!std::isnan(l)) m = std::max(m, l);
  }
  double sum = 0.0;
  for (float l : logits) {
    if (!std::isnan(l)) sum += std::exp(static_cast<double>(l) - m);
  }
  // All -inf (or NaN): every logprob is -inf.
  const double log_norm = m == kNegInf ? 0.0 : static_cast<double>(m) + std::log(sum);

  out.resize(std::min(static_cast<size_t>(n), logits.size()));
  select_top_k(logits, out.size(), out.data());
  for (auto& c : out) c.p = static_cast<float>(static_cast<double>(c.logit) - log_norm);
  return out;
}

}  // namespace strata::sampling
