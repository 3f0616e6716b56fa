// Parsing the placement flags in llama.cpp's syntax: -ot, -ts, --rpc, and -ot node names.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
// GCC 12 reports a false -Wmaybe-uninitialized inside <regex>'s std::function states at -O2 (GCC bug
// 105562); the warning is about the library's code, not this file's.
#ifndef __clang__  // clang has no such warning (and warns about the unknown name)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <regex>
#include <set>

#include "plan/internal.h"

namespace strata::plan {
namespace {

constexpr size_t kMaxFlag = 1 << 16;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return r;
}

// Whether `s` (a prefix of -ot text) holds a '=' and closes every (, { and [ it opens; a backslash
// escapes the next character, and inside [...] only ']' counts.
bool complete_rule(std::string_view s) {
  int paren = 0, brace = 0;
  bool in_class = false, has_eq = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      continue;
    }
    switch (c) {
      case '[': in_class = true; break;
      case '(': ++paren; break;
      case ')': --paren; break;
      case '{': ++brace; break;
      case '}': --brace; break;
      case '=': has_eq = true; break;
      default: break;
    }
  }
  return has_eq && paren <= 0 && brace <= 0 && !in_class;
}

// "host:port" with a port in 1..65535; host may be [v6].
bool valid_endpoint(std::string_view ep) {
  const size_t colon = ep.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view host = ep.substr(0, colon), port = ep.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) return false;
  if (host.front() == '[') return host.size() > 2 && host.back() == ']';
  return host.find_first_of(" \t[]/,=") == std::string_view::npos && host.find(':') == std::string_view::npos;
}

std::string valid_names(const std::vector<Node>& nodes) {
  std::string s = "local, CPU";
  for (size_t i = 1; i < nodes.size(); ++i) s += fmt::format(", {0}, RPC0[{0}]", nodes[i].endpoint);
  return s;
}

}  // namespace

Result<std::vector<TensorOverride>> parse_overrides(std::string_view text) {
  if (text.size() > kMaxFlag) return make_error("-ot: value is longer than {} characters", kMaxFlag);
  if (trim(text).empty()) return make_error("-ot: empty value (expected regex=NODE,...)");
  std::vector<TensorOverride> rules;
  std::string pending;
  auto finish = [&](std::string_view rule) -> Status {
    const size_t eq = rule.rfind('=');
    if (eq == std::string_view::npos) return make_error("-ot: rule '{}' has no '=NODE'", rule);
    TensorOverride o{std::string(rule.substr(0, eq)), std::string(trim(rule.substr(eq + 1)))};
    if (o.node_spec.empty()) return make_error("-ot: rule '{}' names no node after '='", rule);
    if (auto ok = detail::check_pattern(o.pattern); !ok) {
      return make_error("-ot: rule '{}': {}", rule.size() > 80 ? std::string(rule.substr(0, 80)) + "..." : std::string(rule),
                        ok.error().message);
    }
    try {
      std::regex re(o.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return make_error("-ot: rule '{}': invalid regex '{}': {}", rule, o.pattern, e.what());
    }
    rules.push_back(std::move(o));
    return {};
  };
  size_t start = 0;
  bool has_pending = false;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view piece = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!has_pending && trim(piece).empty()) return make_error("-ot: empty rule in '{}'", text);
    if (has_pending) pending += ",";
    pending += piece;
    has_pending = true;
    if (comma == std::string_view::npos) break;
    if (complete_rule(pending)) {
      STRATA_TRY(finish(pending));
      pending.clear();
      has_pending = false;
    }
    start = comma + 1;
  }
  STRATA_TRY(finish(pending));
  return rules;
}

Result<SplitMode> parse_split_mode(std::string_view text) {
  const std::string_view t = trim(text);
  if (t == "layer") return SplitMode::kLayer;
  if (t == "tensor") return SplitMode::kTensor;
  if (t == "none") return make_error("-sm none: Strata has no single-device mode; without --rpc every layer stays here");
  if (t == "row") return make_error("-sm row: Strata splits rows within layers as -sm tensor does; use -sm tensor");
  return make_error("-sm: '{}' is not a split mode (layer or tensor)", t.substr(0, 32));
}

Result<std::vector<double>> parse_tensor_split(std::string_view text) {
  if (text.size() > kMaxFlag) return make_error("-ts: value is too long");
  if (trim(text).empty()) return make_error("-ts: empty value (expected ratios like 3,2)");
  std::vector<double> values;
  size_t start = 0;
  while (true) {
    const size_t sep = text.find_first_of(",/", start);
    const std::string_view item = trim(text.substr(start, sep == std::string_view::npos ? std::string_view::npos : sep - start));
    double v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      return make_error("-ts: '{}' in '{}' is not a number", item, text);
    }
    if (!std::isfinite(v) || v < 0) return make_error("-ts: value '{}' must be a finite number >= 0", item);
    values.push_back(v);
    if (values.size() > 1024) return make_error("-ts: more than 1024 values");
    if (sep == std::string_view::npos) break;
    start = sep + 1;
  }
  return values;
}

Result<std::vector<std::string>> parse_rpc_list(std::string_view text) {
  if (text.size() > kMaxFlag) return make_error("--rpc: value is too long");
  if (trim(text).empty()) return make_error("--rpc: empty value (expected host:port,...)");
  std::vector<std::string> endpoints;
  std::set<std::string> seen;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = trim(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (!valid_endpoint(item)) {
      return make_error("--rpc: '{}' is not host:port (port 1..65535; IPv6 as [addr]:port)", item);
    }
    if (!seen.insert(std::string(item)).second) return make_error("--rpc: worker '{}' is listed twice", item);
    endpoints.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return endpoints;
}

Result<int32_t> resolve_node(const std::vector<Node>& nodes, std::string_view spec) {
  const std::string_view s = trim(spec);
  const std::string l = lower(s);
  if (l == "local" || l == "cpu") return 0;
  std::string_view endpoint = s;
  // llama.cpp's RPC buffer type name: RPC<device>[host:port]; the endpoint picks the worker.
  if (l.rfind("rpc", 0) == 0 && s.size() > 3 && s.back() == ']') {
    const size_t open = s.find('[');
    const std::string_view digits = s.substr(3, open == std::string_view::npos ? 0 : open - 3);
    const bool ok_digits =
        digits.size() <= 9 && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (open == std::string_view::npos || !ok_digits) {
      return make_error("unknown node '{}'; valid names: {}", s, valid_names(nodes));
    }
    endpoint = s.substr(open + 1, s.size() - open - 2);
  }
  for (size_t i = 1; i < nodes.size(); ++i) {
    if (!endpoint.empty() && (nodes[i].endpoint == endpoint || (nodes[i].endpoint.empty() && nodes[i].name == endpoint))) {
      return static_cast<int32_t>(i);
    }
  }
  if (endpoint != s) {
    return make_error("node '{}' names worker '{}', which is not in --rpc; valid names: {}", s, endpoint, valid_names(nodes));
  }
  return make_error("unknown node '{}'; valid names: {}", s, valid_names(nodes));
}

}  // namespace strata::plan
