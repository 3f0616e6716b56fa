// Built-in filters (Jinja2's names and argument conventions; `tojson` is transformers' json.dumps one).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "jinja/interp.h"

namespace strata::jinja {

namespace {

const Value kNone = Value::none();
const Value kUndef = Value::undefined();
const Value kFalse = Value::boolean(false);
const Value kEmpty = Value::string("");

Result<Value> f_length(Interp& in, const Value& v, Args&) {
  switch (v.type()) {
    case Type::String:
      STRATA_TRY(in.count_bytes(v.str().size()));
      return Value::integer(static_cast<int64_t>(utf8_length(v.str())));
    case Type::List: return Value::integer(static_cast<int64_t>(v.items().size()));
    case Type::Undefined: return Value::integer(0);
    case Type::Dict:
      if (!v.is_namespace()) return Value::integer(static_cast<int64_t>(v.dict_obj().items.size()));
      [[fallthrough]];
    default: return make_error("object of type '{}' has no length", type_name(v));
  }
}

// json.dumps(ensure_ascii=True): every non-ASCII character as \\uXXXX (a surrogate pair above U+FFFF).
Result<Value> ascii_escape_json(Interp& in, const std::string& s) {
  size_t size = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_char_len(s, i);
    size += (len == 1) ? 1 : len == 4 ? 12 : 6;
    i += len;
  }
  STRATA_TRY(in.reserve_string(size));
  std::string out;
  out.reserve(size);
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_char_len(s, i);
    const auto lead = static_cast<unsigned char>(s[i]);
    if (len == 1) {
      out += s[i++];
      continue;
    }
    uint32_t cp = lead & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      out += fmt::format("\\u{:04x}", cp);
    }
    i += len;
  }
  return in.make_string(std::move(out), true);
}

Result<Value> f_tojson(Interp& in, const Value& v, Args& args) {
  JsonStyle style;
  const Value& indent = arg(args, 0, "indent", kNone);
  if (indent.is_int()) {
    style.pretty = true;
    style.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(indent.as_int(), 0, 64)), ' ');
  } else if (indent.is_string()) {
    style.pretty = true;
    style.indent = indent.str();
  } else if (!indent.is_none() && !indent.is_undefined()) {
    return make_error("tojson: indent must be an integer or a string");
  }
  if (style.pretty) style.item_sep.assign(1, ',');  // (not = ",": a GCC 12 -Wrestrict false positive)
  const Value& seps = arg(args, 99, "separators", kNone);
  if (seps.is_list() && seps.items().size() == 2 && seps.items()[0].is_string() && seps.items()[1].is_string()) {
    style.item_sep = seps.items()[0].str();
    style.key_sep = seps.items()[1].str();
  }
  style.sort_keys = truthy(arg(args, 99, "sort_keys", kFalse));
  STRATA_TRY(in.reserve_bytes(style.indent.size() + style.item_sep.size() + style.key_sep.size()));
  // The writer refuses before passing the size limit, or what is left of the memory budget.
  const size_t left = in.limits().max_memory - std::min(in.stats().memory, in.limits().max_memory);
  const size_t cap = std::min(in.limits().max_output, left);
  size_t values = 0;
  auto json = to_json(v, style, cap, &values);
  STRATA_TRY(in.count_steps(static_cast<int64_t>(values)));
  if (!json.ok()) {
    if (json.error().message.find("would exceed the size limit") == std::string::npos) return std::move(json).error();
    return cap < in.limits().max_output ? in.reserve_bytes(cap + 1).error() : in.check_string_size(cap + 1).error();
  }
  STRATA_TRY(in.reserve_string(json->size()));
  if (truthy(arg(args, 99, "ensure_ascii", kFalse))) return ascii_escape_json(in, *json);
  return in.make_string(std::move(json).value(), true);
}

Result<Value> f_trim(Interp& in, const Value& v, Args& args) {
  std::string holder;
  STRATA_ASSIGN(std::string_view s, in.text(v, holder));
  STRATA_ASSIGN(std::string_view kept, py_strip(in, s, arg(args, 0, "chars", kNone), true, true));
  STRATA_TRY(in.reserve_string(kept.size()));
  return in.make_string(std::string(kept), true);
}

Result<Value> f_items(Interp& in, const Value& v, Args&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_mapping()) return make_error("items: can only get item pairs from a mapping, not '{}'", type_name(v));
  return dict_items(in, v);
}

Result<Value> f_string(Interp& in, const Value& v, Args&) { return in.stringify(v); }

Result<Value> case_filter(Interp& in, const Value& v, CaseMap how) {
  std::string holder;
  STRATA_ASSIGN(std::string_view s, in.text(v, holder));
  return map_case(in, s, how);
}
Result<Value> f_upper(Interp& in, const Value& v, Args&) { return case_filter(in, v, CaseMap::Upper); }
Result<Value> f_lower(Interp& in, const Value& v, Args&) { return case_filter(in, v, CaseMap::Lower); }
Result<Value> f_capitalize(Interp& in, const Value& v, Args&) { return case_filter(in, v, CaseMap::Capitalize); }
Result<Value> f_title(Interp& in, const Value& v, Args&) { return case_filter(in, v, CaseMap::JinjaTitle); }

// Without listing the sequence first.
Result<Value> f_first_last(Interp& in, const Value& v, bool first) {
  static const Value kEmptySeq = Value::undefined("the sequence is empty (no first/last item)");
  if (v.is_list()) {
    if (v.items().empty()) return kEmptySeq;
    return first ? v.items().front() : v.items().back();
  }
  if (v.is_string()) {
    const std::string& s = v.str();
    if (s.empty()) return kEmptySeq;
    const size_t start = first ? 0 : utf8_prev_start(s, s.size());
    return in.make_string(s.substr(start, first ? utf8_char_len(s, 0) : s.size() - start));
  }
  STRATA_ASSIGN(auto items, in.iterate(v));
  if (items.empty()) return kEmptySeq;
  return first ? items.front() : items.back();
}
Result<Value> f_first(Interp& in, const Value& v, Args&) { return f_first_last(in, v, true); }
Result<Value> f_last(Interp& in, const Value& v, Args&) { return f_first_last(in, v, false); }

Result<Value> f_join(Interp& in, const Value& v, Args& args) {
  const Value& sep = arg(args, 0, "d", kEmpty);
  const Value& attribute = arg(args, 1, "attribute", kNone);
  STRATA_ASSIGN(auto items, in.iterate(v));
  std::string holder;
  STRATA_ASSIGN(std::string_view sep_text, in.text(sep, holder));
  return py_join(in, sep_text, items, attribute, /*strings_only=*/false);
}

Result<Value> f_default(Interp&, const Value& v, Args& args) {
  const Value& def = arg(args, 0, "default_value", kEmpty);
  const bool boolean = truthy(arg(args, 1, "boolean", kFalse));
  if (v.is_undefined() || (boolean && !truthy(v))) return def;
  return v;
}

Result<Value> f_list(Interp& in, const Value& v, Args&) {
  STRATA_ASSIGN(auto items, in.iterate(v));
  return in.make_list(std::move(items), true);  // reserved by iterate()
}

Result<Value> f_replace(Interp& in, const Value& v, Args& args) {
  const Value& old = arg(args, 0, "old", kUndef);
  const Value& repl = arg(args, 1, "new", kUndef);
  const Value& count = arg(args, 2, "count", kNone);
  if (old.is_undefined() || repl.is_undefined()) return make_error("replace needs the old and new strings");
  std::string hold_s, hold_old, hold_repl;
  STRATA_ASSIGN(std::string_view s, in.text(v, hold_s));
  STRATA_ASSIGN(std::string_view o, in.text(old, hold_old));
  STRATA_ASSIGN(std::string_view r, in.text(repl, hold_repl));
  return py_replace(in, s, o, r, count.is_int() ? count.as_int() : -1);
}

// Python int()/float() of a string: surrounding whitespace allowed, nothing else.
std::string_view strip_space(std::string_view s) {
  while (!s.empty() && is_py_space(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && is_py_space(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view s, int base, int64_t& out) {
  std::string t(strip_space(s));
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(t.c_str(), &end, base);
  if (errno || *end) return false;
  out = v;
  return true;
}
bool parse_float(std::string_view s, double& out) {
  const std::string t(strip_space(s));
  if (t.empty()) return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return *end == '\0';
}

Result<Value> f_int(Interp& in, const Value& v, Args& args) {
  static const Value kZero = Value::integer(0);
  static const Value kTen = Value::integer(10);
  const Value& def = arg(args, 0, "default", kZero);
  const Value& base = arg(args, 1, "base", kTen);
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double f = v.as_float();
    if (!std::isfinite(f) || std::fabs(f) > 9.2e18) return def;
    return Value::integer(static_cast<int64_t>(f));
  }
  if (v.is_string()) {
    STRATA_TRY(in.count_bytes(v.str().size()));
    STRATA_TRY(in.reserve_bytes(v.str().size()));  // the parsers' copy
    int64_t i = 0;
    double f = 0;
    if (parse_int(v.str(), base.is_int() ? static_cast<int>(std::clamp<int64_t>(base.as_int(), 2, 36)) : 10, i)) {
      return Value::integer(i);
    }
    if (parse_float(v.str(), f) && std::isfinite(f) && std::fabs(f) < 9.2e18) {
      return Value::integer(static_cast<int64_t>(f));
    }
  }
  return def;
}

Result<Value> f_float(Interp& in, const Value& v, Args& args) {
  static const Value kZero = Value::number(0.0);
  const Value& def = arg(args, 0, "default", kZero);
  if (v.is_number()) return Value::number(v.as_float());
  STRATA_TRY(in.count_bytes(v.str().size()));
  STRATA_TRY(in.reserve_bytes(v.str().size()));
  double f = 0;
  if (v.is_string() && parse_float(v.str(), f)) return Value::number(f);
  return def;
}

Result<Value> f_abs(Interp&, const Value& v, Args&) {
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.is_number()) {
    if (v.as_int() == INT64_MIN) return make_error("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  return make_error("abs: bad operand type '{}'", type_name(v));
}

Result<Value> f_round(Interp&, const Value& v, Args& args) {
  static const Value kZero = Value::integer(0);
  static const Value kCommon = Value::string("common");
  if (!v.is_number()) return make_error("round: bad operand type '{}'", type_name(v));
  const int64_t precision = std::clamp<int64_t>(arg(args, 0, "precision", kZero).as_int(), -15, 15);
  const std::string& method = arg(args, 1, "method", kCommon).str();  // "" when not a string
  if (method != "common" && method != "ceil" && method != "floor") {
    return make_error("round: method must be 'common', 'ceil' or 'floor'");
  }
  // Python's round() of an int stays an int; ceil and floor give floats (as Jinja's math.ceil/floor).
  if (!v.is_float() && method == "common" && precision >= 0) return Value::integer(v.as_int());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value::number(r / scale);  // nearbyint: round half to even, like Python
}

Args shifted(const Args& args, size_t from) {
  Args out;
  for (size_t i = from; i < args.pos.size(); ++i) out.pos.push_back(args.pos[i]);
  out.kw = args.kw;
  return out;
}

Result<Value> f_map(Interp& in, const Value& v, Args& args) {
  STRATA_ASSIGN(auto items, in.iterate(v));
  STRATA_TRY(in.reserve_list(items.size()));
  std::vector<Value> out;
  out.reserve(items.size());
  const Value& attribute = arg(args, 99, "attribute", kNone);
  if (attribute.is_string()) {
    const Value& def = arg(args, 99, "default", kUndef);
    for (const auto& item : items) {
      STRATA_ASSIGN(Value x, attr_path(in, item, attribute.str()));
      out.push_back(x.is_undefined() ? def : x);
    }
  } else {
    if (args.pos.empty() || !args.pos[0].is_string()) return make_error("map needs a filter name or attribute=");
    const std::string filter = args.pos[0].str();
    Args rest = shifted(args, 1);
    for (const auto& item : items) {
      STRATA_TRY(in.count_steps(1));
      Args a = rest;
      STRATA_ASSIGN(Value x, in.apply_filter(filter, item, a));
      out.push_back(std::move(x));
    }
  }
  return in.make_list(std::move(out), true);
}

// select/reject/selectattr/rejectattr.
Result<Value> select_impl(Interp& in, const Value& v, Args& args, bool by_attr, bool keep_when) {
  STRATA_ASSIGN(auto items, in.iterate(v));
  size_t next = 0;
  std::string attribute;
  if (by_attr) {
    if (args.pos.empty() || !args.pos[0].is_string()) return make_error("selectattr/rejectattr need an attribute name");
    attribute = args.pos[0].str();
    next = 1;
  }
  std::string test;
  if (args.pos.size() > next) {
    if (!args.pos[next].is_string()) return make_error("the test name must be a string");
    test = args.pos[next].str();
  }
  Args test_args = shifted(args, next + 1);
  STRATA_TRY(in.reserve_list(items.size()));
  std::vector<Value> out;
  for (const auto& item : items) {
    STRATA_TRY(in.count_steps(1));
    Value subject = item;
    if (by_attr) {
      STRATA_ASSIGN(subject, attr_path(in, item, attribute));
    }
    bool ok;
    if (test.empty()) {
      ok = truthy(subject);
    } else {
      Args a = test_args;
      STRATA_ASSIGN(ok, in.apply_test(test, subject, a));
    }
    if (ok == keep_when) out.push_back(item);
  }
  return in.make_list(std::move(out), true);
}
Result<Value> f_select(Interp& in, const Value& v, Args& a) { return select_impl(in, v, a, false, true); }
Result<Value> f_reject(Interp& in, const Value& v, Args& a) { return select_impl(in, v, a, false, false); }
Result<Value> f_selectattr(Interp& in, const Value& v, Args& a) { return select_impl(in, v, a, true, true); }
Result<Value> f_rejectattr(Interp& in, const Value& v, Args& a) { return select_impl(in, v, a, true, false); }

// Jinja appends a newline, then splits into lines (so a trailing newline is kept as is). The size is
// counted in a first pass over the lines.
Result<Value> f_indent(Interp& in, const Value& v, Args& args) {
  static const Value kFour = Value::integer(4);
  const Value& width = arg(args, 0, "width", kFour);
  const bool first = truthy(arg(args, 1, "first", kFalse));
  const bool blank = truthy(arg(args, 2, "blank", kFalse));
  const std::string spaces(width.is_string() ? 0 : static_cast<size_t>(std::clamp<int64_t>(width.as_int(), 0, 256)),
                           ' ');
  const std::string_view pad = width.is_string() ? std::string_view(width.str()) : std::string_view(spaces);
  std::string holder;
  STRATA_ASSIGN(std::string_view text, in.text(v, holder));
  STRATA_TRY(in.count_bytes(2 * text.size()));
  auto run = [&](auto line) {  // line(index, begin, end) for each line of text + "\n"
    size_t start = 0, index = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      if (i == text.size() || text[i] == '\n' || text[i] == '\r') {
        line(index++, start, i);
        if (i < text.size() && text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
  };
  auto padded = [&](size_t index, size_t b, size_t e) { return (index > 0 || first) && (blank || e > b); };
  size_t size = 0, pads = 0;
  run([&](size_t index, size_t b, size_t e) {
    size += (e - b) + (index ? 1 : 0);
    pads += padded(index, b, e);
  });
  size_t pad_bytes = 0;
  if (__builtin_mul_overflow(pads, pad.size(), &pad_bytes) || __builtin_add_overflow(size, pad_bytes, &size)) {
    size = SIZE_MAX;
  }
  STRATA_TRY(in.reserve_string(size));
  std::string out;
  out.reserve(size);
  run([&](size_t index, size_t b, size_t e) {
    if (index) out += '\n';
    if (padded(index, b, e)) out += pad;
    out.append(text.substr(b, e - b));
  });
  return in.make_string(std::move(out), true);
}

Result<Value> f_reverse(Interp& in, const Value& v, Args&) {
  if (v.is_string()) {  // character by character, without listing the characters
    const std::string& s = v.str();
    STRATA_TRY(in.reserve_string(s.size()));
    std::string out(s.size(), '\0');
    for (size_t i = 0; i < s.size();) {
      const size_t len = utf8_char_len(s, i);
      s.copy(out.data() + (s.size() - i - len), len, i);
      i += len;
    }
    return in.make_string(std::move(out), true);
  }
  STRATA_ASSIGN(auto items, in.iterate(v));
  std::reverse(items.begin(), items.end());
  return in.make_list(std::move(items), true);  // reserved by iterate()
}

// Sorting charges n log2 n steps up front, and every comparison by the elements it visits.
Result<Value> sort_values(Interp& in, std::vector<Value> items, const Value& attribute, bool reverse,
                          bool case_sensitive) {
  const size_t n = items.size();
  STRATA_TRY(in.count_steps(static_cast<int64_t>(n * static_cast<size_t>(std::bit_width(n)))));
  STRATA_TRY(in.reserve_bytes(n * 2 * Interp::kValueBytes));
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(n);
  for (auto& item : items) {
    Value key = item;
    if (attribute.is_string()) {
      STRATA_ASSIGN(key, attr_path(in, item, attribute.str()));
    }
    if (key.is_string() && !case_sensitive) {
      STRATA_ASSIGN(key, map_case(in, key.str(), CaseMap::Lower));
    }
    keyed.emplace_back(std::move(key), std::move(item));
  }
  // Once an error (or the step limit) is hit, every comparison is "equal" (consistent for the sort) and
  // the error is reported after it.
  Status error = ok_status();
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    if (!error.ok()) return false;
    auto c = in.order(a.first, b.first, /*prepaid=*/true);
    if (!c.ok()) {
      error = std::move(c).error();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  STRATA_TRY(std::move(error));
  std::vector<Value> out;
  out.reserve(n);
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return in.make_list(std::move(out), true);  // reserved by the caller's iterate()
}

Result<Value> f_sort(Interp& in, const Value& v, Args& args) {
  STRATA_ASSIGN(auto items, in.iterate(v));
  return sort_values(in, std::move(items), arg(args, 2, "attribute", kNone), truthy(arg(args, 0, "reverse", kFalse)),
                     truthy(arg(args, 1, "case_sensitive", kFalse)));
}

Result<Value> f_dictsort(Interp& in, const Value& v, Args& args) {
  if (!v.is_mapping()) return make_error("dictsort: expected a mapping, got '{}'", type_name(v));
  STRATA_ASSIGN(Value pairs, dict_items(in, v));
  static const Value kZeroPath = Value::string("0");
  return sort_values(in, pairs.items(), kZeroPath, truthy(arg(args, 2, "reverse", kFalse)),
                     truthy(arg(args, 0, "case_sensitive", kFalse)));
}

// Quadratic in the number of distinct items, as Jinja's; every comparison is charged.
Result<Value> f_unique(Interp& in, const Value& v, Args& args) {
  STRATA_ASSIGN(auto items, in.iterate(v));
  const Value& attribute = arg(args, 1, "attribute", kNone);
  const bool case_sensitive = truthy(arg(args, 0, "case_sensitive", kFalse));
  STRATA_TRY(in.reserve_bytes(items.size() * 2 * Interp::kValueBytes));
  std::vector<Value> out, seen;
  for (const auto& item : items) {
    STRATA_TRY(in.count_steps(1));
    Value key = item;
    if (attribute.is_string()) {
      STRATA_ASSIGN(key, attr_path(in, item, attribute.str()));
    }
    if (key.is_string() && !case_sensitive) {
      STRATA_ASSIGN(key, map_case(in, key.str(), CaseMap::Lower));
    }
    bool found = false;
    for (const Value& s : seen) {
      STRATA_ASSIGN(found, in.equal(s, key));
      if (found) break;
    }
    if (!found) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return in.make_list(std::move(out), true);
}

Result<Value> min_max(Interp& in, const Value& v, Args& args, bool want_max) {
  STRATA_ASSIGN(auto items, in.iterate(v));
  if (items.empty()) return Value::undefined("min/max of an empty sequence");
  STRATA_ASSIGN(Value sorted, sort_values(in, std::move(items), arg(args, 1, "attribute", kNone), false,
                                          truthy(arg(args, 0, "case_sensitive", kFalse))));
  return want_max ? sorted.items().back() : sorted.items().front();
}
Result<Value> f_min(Interp& in, const Value& v, Args& a) { return min_max(in, v, a, false); }
Result<Value> f_max(Interp& in, const Value& v, Args& a) { return min_max(in, v, a, true); }

Result<Value> f_sum(Interp& in, const Value& v, Args& args) {
  static const Value kZero = Value::integer(0);
  STRATA_ASSIGN(auto items, in.iterate(v));
  const Value& attribute = arg(args, 0, "attribute", kNone);
  Value total = arg(args, 1, "start", kZero);
  for (const auto& item : items) {
    STRATA_TRY(in.count_steps(1));
    Value x = item;
    if (attribute.is_string()) {
      STRATA_ASSIGN(x, attr_path(in, item, attribute.str()));
    }
    if (!x.is_number() || !total.is_number()) return make_error("sum: unsupported operand type '{}'", type_name(x));
    if (x.is_float() || total.is_float()) {
      total = Value::number(total.as_float() + x.as_float());
    } else {
      int64_t r;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) return make_error("integer overflow");
      total = Value::integer(r);
    }
  }
  return total;
}

const char* html_escape(char c) {
  switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&#34;";
    case '\'': return "&#39;";
    default: return nullptr;
  }
}

Result<Value> f_escape(Interp& in, const Value& v, Args&) {
  std::string holder;
  STRATA_ASSIGN(std::string_view s, in.text(v, holder));
  size_t size = 0;
  for (char c : s) size += html_escape(c) ? std::strlen(html_escape(c)) : 1;
  STRATA_TRY(in.reserve_string(size));
  std::string out;
  out.reserve(size);
  for (char c : s) {
    if (const char* e = html_escape(c)) {
      out += e;
    } else {
      out += c;
    }
  }
  return in.make_string(std::move(out), true);
}

Result<Value> f_attr(Interp& in, const Value& v, Args& args) {
  const Value& name = arg(args, 0, "name", kUndef);
  if (!name.is_string()) return make_error("attr needs an attribute name");
  return in.get_attr(v, name.str());
}

Result<Value> f_wordcount(Interp& in, const Value& v, Args&) {
  std::string holder;
  STRATA_ASSIGN(std::string_view s, in.text(v, holder));
  STRATA_TRY(in.count_bytes(s.size()));
  int64_t n = 0;
  bool in_word = false;
  for (char c : s) {
    const bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value::integer(n);
}

Result<Value> f_center(Interp& in, const Value& v, Args& args) {
  static const Value kWidth = Value::integer(80);
  std::string holder;
  STRATA_ASSIGN(std::string_view s, in.text(v, holder));
  const int64_t width = std::min<int64_t>(arg(args, 0, "width", kWidth).as_int(), 1 << 20);
  STRATA_TRY(in.count_bytes(s.size()));
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return v.is_string() ? v : in.make_string(std::string(s));
  const int64_t total = width - len;
  const int64_t left = total / 2 + (total & width & 1);  // Python's str.center split
  STRATA_TRY(in.reserve_string(s.size() + static_cast<size_t>(total)));
  std::string out(static_cast<size_t>(left), ' ');
  out.append(s).append(static_cast<size_t>(total - left), ' ');
  return in.make_string(std::move(out), true);
}

}  // namespace

Result<Value> attr_path(Interp& in, const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (start <= path.size()) {
    STRATA_TRY(in.count_steps(1));
    size_t dot = path.find('.', start);
    if (dot == std::string::npos) dot = path.size();
    const std::string_view part = std::string_view(path).substr(start, dot - start);
    Value key;
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        part.size() < 18) {
      key = Value::integer(std::atoll(std::string(part).c_str()));
    } else {
      STRATA_ASSIGN(key, in.make_string(std::string(part)));
    }
    STRATA_ASSIGN(cur, in.get_item(cur, key));
    start = dot + 1;
  }
  return cur;
}

const Value& arg(const Args& args, size_t i, std::string_view name, const Value& fallback) {
  if (i < args.pos.size()) return args.pos[i];
  for (const auto& [k, v] : args.kw) {
    if (k == name) return v;
  }
  return fallback;
}

FilterFn find_filter(std::string_view name) {
  static const std::map<std::string, FilterFn, std::less<>> kFilters = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_string},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  const auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

}  // namespace strata::jinja
