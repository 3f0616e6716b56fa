// The layer split from -ts / -ngl / usable memory, with llama.cpp's dev_layer formula, and the -ts that
// reproduces a given placement.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "plan/internal.h"

namespace strata::plan::detail {
namespace {

std::vector<int32_t> workers(const std::vector<Node>& nodes) {
  std::vector<int32_t> w;
  for (size_t i = 1; i < nodes.size(); ++i) w.push_back(static_cast<int32_t>(i));
  return w;
}

std::vector<int32_t> all_nodes(const std::vector<Node>& nodes) {
  std::vector<int32_t> a;
  for (size_t i = 0; i < nodes.size(); ++i) a.push_back(static_cast<int32_t>(i));
  return a;
}

// llama.cpp splits by each device's free memory when -ts is unset or all zero. Free memory jitters
// by megabytes between runs; counted in whole 256 MiB units, equal machines split the same way every
// start, so a worker's cached weights stay valid.
std::vector<float> memory_ratios(const std::vector<Node>& nodes, const std::vector<int32_t>& devices) {
  constexpr uint64_t kUnit = uint64_t{256} << 20;
  std::vector<float> r;
  for (int32_t d : devices) {
    const uint64_t m = nodes[d].memory_usable;
    r.push_back(static_cast<float>(m == kUnlimited || m < kUnit ? m : m / kUnit * kUnit));
  }
  return r;
}

std::string memory_list(const std::vector<Node>& nodes, const std::vector<int32_t>& devices) {
  std::string s;
  for (int32_t d : devices) {
    if (!s.empty()) s += ", ";
    s += node_label(nodes, d) + " " +
         (nodes[d].memory_usable == kUnlimited ? std::string("unlimited") : human_bytes(nodes[d].memory_usable));
  }
  return s;
}

std::string node_list(const std::vector<Node>& nodes, const std::vector<int32_t>& devices) {
  std::string s;
  for (int32_t d : devices) s += (s.empty() ? "" : ", ") + node_label(nodes, d);
  return s;
}

// -ts values finite and >= 0, -ngl not negative, and as many -ts values as workers (or one more:
// this machine first).
Status check_split_flags(const std::vector<Node>& nodes, const Request& request) {
  const int32_t n_workers = static_cast<int32_t>(nodes.size()) - 1;
  const std::vector<double>& ts = request.tensor_split;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!std::isfinite(ts[i]) || ts[i] < 0) {
      return make_error("plan: -ts value {} (position {}) must be a finite number >= 0", ts[i], i + 1);
    }
  }
  if (request.n_gpu_layers < -1) {
    return make_error("plan: -ngl {} is negative (give the number of layers for the workers, 0 or more)",
                      request.n_gpu_layers);
  }
  const int32_t k = static_cast<int32_t>(ts.size());
  if (!ts.empty() && k != n_workers && k != n_workers + 1) {
    if (n_workers == 0) {
      return make_error("plan: -ts has {} values but there are no --rpc workers; give 1 value (this machine) or none", k);
    }
    return make_error("plan: -ts has {} values but there are {} workers (--rpc): give {} (one per worker, in --rpc order) "
                      "or {} (this machine first, then the workers)",
                      k, n_workers, n_workers, n_workers + 1);
  }
  return {};
}

// "-ngl 30 -ts 1,1", or "the split by usable memory" when neither is explicit.
std::string split_flag_text(const Request& request, bool explicit_flags) {
  if (!explicit_flags) return "the split by usable memory";
  std::string text;
  if (request.n_gpu_layers >= 0) text = fmt::format("-ngl {}", request.n_gpu_layers);
  if (!request.tensor_split.empty()) {
    text += fmt::format("{}-ts {}", text.empty() ? "" : " ", join_values(request.tensor_split));
  }
  return text;
}

// No workers: every layer here, whatever the flags said.
FlagSplit single_node_split(int32_t n_layer, const Request& request, FlagSplit f) {
  f.owner.assign(static_cast<size_t>(n_layer) + 1, 0);
  f.decision.kind = Decision::Kind::kSingleNode;
  f.decision.owner = f.owner;
  if (request.n_gpu_layers > 0) {
    f.warnings.push_back(fmt::format("-ngl {} has no effect: there are no --rpc workers", request.n_gpu_layers));
  }
  return f;
}

// With -ts, its values name the devices: one per worker, or this machine first. Without it, -ngl
// offloads to the workers; the memory split uses every node.
std::vector<int32_t> split_devices(const std::vector<Node>& nodes, const Request& request) {
  const size_t k = request.tensor_split.size();
  if (k > 0) return k == nodes.size() - 1 ? workers(nodes) : all_nodes(nodes);
  return request.n_gpu_layers >= 0 ? workers(nodes) : all_nodes(nodes);
}

// How -ts / -ngl applied: " over W1, W2", " (layers 21-39 + output offloaded over W1, W2)".
std::string flags_detail(int32_t n_layer, const std::vector<Node>& nodes, const Request& request,
                         const std::vector<int32_t>& devices, int64_t n_offload, bool by_memory) {
  if (request.n_gpu_layers < 0) {
    return request.tensor_split.empty() ? "" : fmt::format(" over {}", node_list(nodes, devices));
  }
  const int64_t act = std::min<int64_t>(n_offload, int64_t{n_layer} + 1);
  const int64_t i_start = int64_t{n_layer} + 1 - act;
  std::string how =
      act == 0 ? fmt::format(" (nothing offloaded: all {} layers + output stay on {})", n_layer, node_label(nodes, 0))
      : i_start == 0      ? fmt::format(" (all {} layers + output offloaded", n_layer)
      : i_start == n_layer ? std::string(" (only the output offloaded")
      : i_start == n_layer - 1 ? fmt::format(" (layer {} + output offloaded", i_start)
                               : fmt::format(" (layers {}-{} + output offloaded", i_start, n_layer - 1);
  if (act > 0) {
    how += by_memory ? fmt::format(", split by usable memory: {})", memory_list(nodes, devices))
                     : fmt::format(" over {})", node_list(nodes, devices));
  }
  return how;
}

}  // namespace

std::vector<float> ratios_as_float(const std::vector<double>& values) {
  double top = 0;
  for (double v : values) top = std::max(top, v);
  const bool rescale = top > 1e30 || (top > 0 && top < 1e-30);
  std::vector<float> r;
  for (double v : values) r.push_back(static_cast<float>(rescale ? v / top : v));
  return r;
}

std::vector<int32_t> split_layers(int32_t n_layer, const std::vector<int32_t>& devices, const std::vector<float>& ratios,
                                  int64_t n_offload) {
  const int64_t n_all = int64_t{n_layer} + 1;
  std::vector<int32_t> owner(static_cast<size_t>(n_all), 0);
  if (devices.empty() || ratios.size() != devices.size()) return owner;
  std::vector<float> splits(ratios);
  if (std::all_of(splits.begin(), splits.end(), [](float x) { return !(x > 0.0f); })) {
    std::fill(splits.begin(), splits.end(), 1.0f);
  }
  // Sum and normalize the split points, in float like llama.cpp.
  float split_sum = 0.0f;
  for (float& s : splits) {
    split_sum += std::isfinite(s) && s > 0.0f ? s : 0.0f;
    s = split_sum;
  }
  for (float& s : splits) s /= split_sum;
  const int64_t i_start = std::max<int64_t>(n_all - n_offload, 0);
  const int64_t act = std::min<int64_t>(n_offload, n_all);
  for (int64_t il = 0; il < n_all; ++il) {
    if (il < i_start || il - i_start >= act) continue;
    const float at = static_cast<float>(il - i_start) / static_cast<float>(act);
    size_t idx = static_cast<size_t>(std::upper_bound(splits.begin(), splits.end(), at) - splits.begin());
    idx = std::min(idx, splits.size() - 1);
    owner[static_cast<size_t>(il)] = devices[idx];
  }
  return owner;
}

Result<FlagSplit> split_by_flags(int32_t n_layer, const std::vector<Node>& nodes, const Request& request) {
  STRATA_TRY(check_split_flags(nodes, request));
  const std::vector<double>& ts = request.tensor_split;
  const bool ts_given = !ts.empty();
  const bool ts_zero = std::all_of(ts.begin(), ts.end(), [](double v) { return v == 0; });
  const bool ngl_given = request.n_gpu_layers >= 0;
  FlagSplit f;
  f.explicit_flags = ngl_given || (ts_given && !ts_zero);
  f.flag_text = split_flag_text(request, f.explicit_flags);
  if (nodes.size() == 1) return single_node_split(n_layer, request, std::move(f));

  const std::vector<int32_t> devices = split_devices(nodes, request);
  const bool by_memory = !ts_given || ts_zero;
  const std::vector<float> ratios = by_memory ? memory_ratios(nodes, devices) : ratios_as_float(ts);
  const int64_t n_offload = ngl_given ? request.n_gpu_layers : int64_t{n_layer} + 1;
  f.owner = split_layers(n_layer, devices, ratios, n_offload);
  if (!f.explicit_flags) {
    // The output head goes with the last layer.
    f.owner[n_layer] = f.owner[n_layer - 1];
    f.output_follows_last = true;
    f.decision.kind = Decision::Kind::kSplitByMemory;
    f.decision.detail = memory_list(nodes, devices);
  } else {
    f.decision.kind = Decision::Kind::kSplitByFlags;
    f.decision.detail = flags_detail(n_layer, nodes, request, devices, n_offload, by_memory);
  }
  f.decision.flags = f.flag_text;
  f.decision.owner = f.owner;
  f.decision.all_zero_split = ts_given && ts_zero;
  return f;
}

std::optional<TsSuggestion> agreeing_tensor_split(const std::vector<Node>& nodes, const std::vector<int32_t>& owner,
                                                  const Request& request) {
  const int32_t n_workers = static_cast<int32_t>(nodes.size()) - 1;
  if (n_workers <= 0 || owner.empty()) return std::nullopt;
  const int32_t n_layer = static_cast<int32_t>(owner.size()) - 1;
  std::vector<int64_t> counts(nodes.size(), 0);
  for (int32_t o : owner) {
    if (o >= 0 && o < static_cast<int32_t>(nodes.size())) ++counts[o];
  }
  const bool local_first = counts[0] > 0;
  const std::vector<int32_t> devices = local_first ? all_nodes(nodes) : workers(nodes);
  std::vector<double> values;
  for (int32_t d : devices) values.push_back(static_cast<double>(counts[d]));
  if (split_layers(n_layer, devices, ratios_as_float(values), int64_t{n_layer} + 1) != owner) return std::nullopt;

  TsSuggestion s;
  s.flag = "-ts " + join_values(values);
  if (request.n_gpu_layers >= 0 && request.n_gpu_layers < n_layer + 1) s.flag += " without -ngl";
  std::string parts;
  for (int32_t d : devices) {
    if (counts[d] == 0) continue;
    const bool out = owner[n_layer] == d;
    const int64_t layers = counts[d] - (out ? 1 : 0);
    std::string what = layers > 0 ? fmt::format("{} layer{}", layers, layers == 1 ? "" : "s") : "";
    if (out) what += layers > 0 ? " + output" : "output";
    parts += fmt::format("{}{} on {}", parts.empty() ? "" : ", ", what, node_label(nodes, d));
  }
  s.detail = "(" + parts + ")";
  return s;
}

std::string agreeing_phrase(const std::vector<Node>& nodes, const std::vector<int32_t>& owner, const Request& request) {
  if (auto s = agreeing_tensor_split(nodes, owner, request)) return s->flag + " " + s->detail;
  return "none: no -ts can express this placement (its owners are not in node order, this machine first), so only "
         "-ot can";
}

}  // namespace strata::plan::detail
