// Built-in tests, Python methods of str/dict/list, global functions, and the string helpers they share.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>

#include "text/jinja_interp.h"

namespace strata::text::jinja {

namespace {

const Value kNone = Value::none();
const Value kUndef = Value::undefined();

bool is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// ---- tests --------------------------------------------------------------------------------------

Result<bool> t_defined(Interp&, const Value& v, Args&) { return !v.is_undefined(); }
Result<bool> t_undefined(Interp&, const Value& v, Args&) { return v.is_undefined(); }
Result<bool> t_none(Interp&, const Value& v, Args&) { return v.is_none(); }
Result<bool> t_boolean(Interp&, const Value& v, Args&) { return v.is_bool(); }
Result<bool> t_true(Interp&, const Value& v, Args&) { return v.is_bool() && v.as_bool(); }
Result<bool> t_false(Interp&, const Value& v, Args&) { return v.is_bool() && !v.as_bool(); }
Result<bool> t_integer(Interp&, const Value& v, Args&) { return v.is_int(); }
Result<bool> t_float(Interp&, const Value& v, Args&) { return v.is_float(); }
Result<bool> t_number(Interp&, const Value& v, Args&) { return v.is_number(); }  // Python: bool is a number
Result<bool> t_string(Interp&, const Value& v, Args&) { return v.is_string(); }
Result<bool> t_mapping(Interp&, const Value& v, Args&) { return v.is_mapping(); }
// Jinja's Undefined is iterable (empty) and has len() and __getitem__, so it passes these two tests.
Result<bool> t_iterable(Interp&, const Value& v, Args&) {
  return v.is_string() || v.is_list() || v.is_mapping() || v.is_undefined();
}
Result<bool> t_sequence(Interp&, const Value& v, Args&) {
  return v.is_string() || v.is_list() || v.is_mapping() || v.is_undefined();
}
Result<bool> t_callable(Interp&, const Value& v, Args&) { return v.is_callable(); }
// Python's str.islower()/isupper(): at least one cased character, and none of the other case.
bool is_lower(const std::string& s) { return ascii_lower(s) == s && ascii_upper(s) != s; }
bool is_upper(const std::string& s) { return ascii_upper(s) == s && ascii_lower(s) != s; }
Result<bool> t_lower(Interp&, const Value& v, Args&) { return v.is_string() && is_lower(v.str()); }
Result<bool> t_upper(Interp&, const Value& v, Args&) { return v.is_string() && is_upper(v.str()); }
Result<bool> t_escaped(Interp&, const Value&, Args&) { return false; }

Result<const Value*> other(const Args& args, const char* test) {
  const Value& o = arg(args, 0, "other", kUndef);
  if (args.pos.empty() && args.kw.empty()) return make_error("the '{}' test needs an argument", test);
  return &o;
}

Result<bool> t_eq(Interp&, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* o, other(a, "equalto"));
  return equals(v, *o);
}
Result<bool> t_ne(Interp&, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* o, other(a, "ne"));
  return !equals(v, *o);
}
template <int kWant>  // -2: <, -1: <=, 1: >=, 2: >
Result<bool> t_order(Interp&, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* o, other(a, "comparison"));
  STRATA_ASSIGN(int c, compare(v, *o));
  switch (kWant) {
    case -2: return c < 0;
    case -1: return c <= 0;
    case 1: return c >= 0;
    default: return c > 0;
  }
}
Result<bool> t_sameas(Interp&, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* o, other(a, "sameas"));
  if (v.type() != o->type()) return false;
  if (v.is_list() || v.is_dict() || v.is_callable()) return v.identity() == o->identity();
  return equals(v, *o);
}
Result<bool> t_in(Interp&, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* seq, other(a, "in"));
  switch (seq->type()) {
    case Type::String:
      if (!v.is_string()) return make_error("'in <string>' requires a string as left operand, not '{}'", type_name(v));
      return seq->str().find(v.str()) != std::string::npos;
    case Type::List:
      return std::any_of(seq->items().begin(), seq->items().end(), [&](const Value& x) { return equals(x, v); });
    case Type::Undefined: return false;
    case Type::Dict:
      if (!seq->is_namespace()) return v.is_string() && seq->dict_obj().find(v.str()) != nullptr;
      [[fallthrough]];
    default: return make_error("argument of type '{}' is not iterable", type_name(*seq));
  }
}
Result<bool> t_odd(Interp&, const Value& v, Args&) {
  if (!v.is_int()) return make_error("the 'odd' test needs an integer");
  return v.as_int() % 2 != 0;
}
Result<bool> t_even(Interp&, const Value& v, Args&) {
  if (!v.is_int()) return make_error("the 'even' test needs an integer");
  return v.as_int() % 2 == 0;
}
Result<bool> t_divisibleby(Interp&, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* o, other(a, "divisibleby"));
  if (!v.is_int() || !o->is_int() || o->as_int() == 0) return make_error("divisibleby needs non-zero integers");
  if (o->as_int() == -1) return true;
  return v.as_int() % o->as_int() == 0;
}

// ---- methods ------------------------------------------------------------------------------------

bool chars_match(std::string_view s, const Value& prefix, bool at_end, bool& ok) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) return false;
    const std::string& t = p.str();
    if (t.size() > s.size()) return false;
    return at_end ? s.substr(s.size() - t.size()) == t : s.substr(0, t.size()) == t;
  };
  ok = true;
  if (prefix.is_string()) return one(prefix);
  if (prefix.is_list()) return std::any_of(prefix.items().begin(), prefix.items().end(), one);
  ok = false;
  return false;
}

Result<Value> py_split(Interp& in, const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep.is_none() || sep.is_undefined()) {
    // Runs of whitespace separate; leading/trailing whitespace is ignored.
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_py_space(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      size_t j = i;
      while (j < s.size() && !is_py_space(static_cast<unsigned char>(s[j]))) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
      const size_t keep = static_cast<size_t>(maxsplit);
      if (!from_right) {
        std::string rest = s.substr(words[keep].first);
        while (!rest.empty() && is_py_space(static_cast<unsigned char>(rest.back()))) rest.pop_back();
        for (size_t k = 0; k < keep; ++k) parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
        parts.push_back(rest);
      } else {
        const size_t cut = words.size() - keep - 1;
        std::string rest = s.substr(0, words[cut].second);
        size_t b = 0;
        while (b < rest.size() && is_py_space(static_cast<unsigned char>(rest[b]))) ++b;
        parts.push_back(rest.substr(b));
        for (size_t k = cut + 1; k < words.size(); ++k) {
          parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
        }
      }
    } else {
      for (const auto& [b, e] : words) parts.push_back(s.substr(b, e - b));
    }
  } else {
    if (!sep.is_string()) return make_error("split: the separator must be a string");
    const std::string& d = sep.str();
    if (d.empty()) return make_error("split: empty separator");
    if (!from_right) {
      size_t start = 0;
      int64_t n = 0;
      while (maxsplit < 0 || n < maxsplit) {
        const size_t at = s.find(d, start);
        if (at == std::string::npos) break;
        parts.push_back(s.substr(start, at - start));
        start = at + d.size();
        ++n;
      }
      parts.push_back(s.substr(start));
    } else {
      size_t end = s.size();
      int64_t n = 0;
      std::vector<std::string> rev;
      while ((maxsplit < 0 || n < maxsplit) && end >= d.size()) {
        const size_t at = s.rfind(d, end - d.size());
        if (at == std::string::npos) break;
        rev.push_back(s.substr(at + d.size(), end - at - d.size()));
        end = at;
        ++n;
      }
      rev.push_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  }
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return in.make_list(std::move(items));
}

int64_t char_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte_pos)));
}

Result<Value> string_method(Interp& in, const std::string& s, std::string_view name, Args& args) {
  const Value& a0 = arg(args, 0, "", kNone);
  if (name == "startswith" || name == "endswith") {
    bool ok = false;
    const bool r = chars_match(s, a0, name == "endswith", ok);
    if (!ok) return make_error("{} needs a string or a list of strings", name);
    return Value::boolean(r);
  }
  if (name == "split" || name == "rsplit") {
    const Value& sep = arg(args, 0, "sep", kNone);
    const Value& maxsplit = arg(args, 1, "maxsplit", kNone);
    return py_split(in, s, sep, maxsplit.is_int() ? maxsplit.as_int() : -1, name == "rsplit");
  }
  if (name == "strip") return Value::string(py_strip(s, arg(args, 0, "chars", kNone), true, true));
  if (name == "lstrip") return Value::string(py_strip(s, arg(args, 0, "chars", kNone), true, false));
  if (name == "rstrip") return Value::string(py_strip(s, arg(args, 0, "chars", kNone), false, true));
  if (name == "upper") return Value::string(ascii_upper(s));
  if (name == "lower") return Value::string(ascii_lower(s));
  if (name == "title") return Value::string(title_case(s, false));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "replace") {
    const Value& count = arg(args, 2, "count", kNone);
    if (!a0.is_string() || !arg(args, 1, "", kNone).is_string()) return make_error("replace needs two strings");
    STRATA_ASSIGN(auto r, py_replace(in, s, a0.str(), args.pos[1].str(), count.is_int() ? count.as_int() : -1));
    return Value::string(std::move(r));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    if (!a0.is_string()) return make_error("{} needs a string argument", name);
    const std::string& sub = a0.str();
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::integer(n);
    }
    const size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") return make_error("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(char_index(s, at));
  }
  if (name == "join") {
    STRATA_ASSIGN(auto items, in.iterate(a0));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) return make_error("join: item {} is '{}', not a string", i, type_name(items[i]));
      if (i) out += s;
      out += items[i].str();
      STRATA_TRY(in.check_string_size(out.size()));
    }
    return in.make_string(std::move(out));
  }
  if (name == "splitlines") {
    std::vector<Value> lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        lines.push_back(Value::string(s.substr(start, i - start)));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
    if (start < s.size()) lines.push_back(Value::string(s.substr(start)));
    return in.make_list(std::move(lines));
  }
  auto all = [&](auto pred) {
    return Value::boolean(!s.empty() &&
                          std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)); }));
  };
  if (name == "isdigit") return all([](unsigned char c) { return std::isdigit(c) != 0; });
  if (name == "isalpha") return all([](unsigned char c) { return std::isalpha(c) != 0; });
  if (name == "isalnum") return all([](unsigned char c) { return std::isalnum(c) != 0; });
  if (name == "isspace") return all([](unsigned char c) { return is_py_space(c); });
  if (name == "islower") return Value::boolean(is_lower(s));
  if (name == "isupper") return Value::boolean(is_upper(s));
  return make_error("'str' object has no method '{}'", name);
}

const char* const kStringMethods[] = {
    "startswith", "endswith",   "split",   "rsplit",  "strip",   "lstrip",  "rstrip", "upper", "lower",
    "title",      "capitalize", "replace", "find",    "rfind",   "index",   "rindex", "count", "join",
    "splitlines", "isdigit",    "isalpha", "isalnum", "isspace", "islower", "isupper"};
const char* const kDictMethods[] = {"items", "keys", "values", "get"};
const char* const kListMethods[] = {"count", "index"};

template <size_t N>
bool contains(const char* const (&names)[N], std::string_view name) {
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
}

// ---- globals ------------------------------------------------------------------------------------

Result<Value> g_range(Interp& in, Args& args) {
  int64_t start = 0, stop = 0, step = 1;
  for (const auto& a : args.pos) {
    if (!a.is_int() && !a.is_bool()) return make_error("range() arguments must be integers, got '{}'", type_name(a));
  }
  if (args.pos.size() == 1) {
    stop = args.pos[0].as_int();
  } else if (args.pos.size() == 2 || args.pos.size() == 3) {
    start = args.pos[0].as_int();
    stop = args.pos[1].as_int();
    if (args.pos.size() == 3) step = args.pos[2].as_int();
  } else {
    return make_error("range() takes 1 to 3 integer arguments");
  }
  if (step == 0) return make_error("range() step must not be zero");
  const double count =
      step > 0 ? std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step))
               : std::ceil((static_cast<double>(start) - static_cast<double>(stop)) / static_cast<double>(-step));
  if (count > static_cast<double>(in.limits().max_list)) {
    return make_error("range() of {:.0f} elements exceeds the limit of {}", count, in.limits().max_list);
  }
  std::vector<Value> items;
  const auto n = static_cast<int64_t>(std::max(0.0, count));
  items.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    int64_t offset = 0, v = 0;
    if (__builtin_mul_overflow(k, step, &offset) || __builtin_add_overflow(start, offset, &v)) break;
    if (step > 0 ? v >= stop : v <= stop) break;
    items.push_back(Value::integer(v));
  }
  return in.make_list(std::move(items));
}

Result<Value> g_namespace(Interp& in, Args& args) {
  std::vector<std::pair<std::string, Value>> items;
  if (!args.pos.empty()) {
    if (args.pos.size() > 1 || !args.pos[0].is_mapping()) {
      return make_error("namespace() takes keyword arguments or one dict");
    }
    items = args.pos[0].dict_obj().items;
  }
  for (const auto& kv : args.kw) items.push_back(kv);
  return in.make_namespace(std::move(items));
}

Result<Value> g_dict(Interp& in, Args& args) {
  std::vector<std::pair<std::string, Value>> items;
  if (!args.pos.empty()) {
    if (args.pos.size() > 1 || !args.pos[0].is_mapping()) {
      return make_error("dict() takes keyword arguments or one dict");
    }
    items = args.pos[0].dict_obj().items;
  }
  for (const auto& kv : args.kw) items.push_back(kv);
  return in.make_dict(std::move(items));
}

Result<Value> g_raise_exception(Interp&, Args& args) {
  return make_error("template raised an error: {}", to_str(arg(args, 0, "message", kNone)));
}

Result<Value> g_strftime_now(Interp& in, Args& args) {
  const Value& format = arg(args, 0, "format", kUndef);
  if (!format.is_string()) return make_error("strftime_now() needs a format string");
  if (format.str().size() > 256) return make_error("strftime_now(): format too long");
  const std::time_t now = in.options().now ? *in.options().now : std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[2048];
  const size_t n = std::strftime(buf, sizeof buf, format.str().c_str(), &tm);
  return Value::string(std::string(buf, n));
}

Result<Value> g_joiner(Interp&, Args& args) {
  static const Value kComma = Value::string(", ");
  const std::string sep = to_str(arg(args, 0, "sep", kComma));
  auto used = std::make_shared<bool>(false);
  return Value::callable("joiner", [sep, used](Interp&, Args&) -> Result<Value> {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return Value::string(sep);
  });
}

}  // namespace

// ---- exported -----------------------------------------------------------------------------------

TestFn find_test(std::string_view name) {
  static const std::map<std::string, TestFn, std::less<>> kTests = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"lower", t_lower},
      {"upper", t_upper},
      {"escaped", t_escaped},
      {"equalto", t_eq},
      {"eq", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_order<-2>},
      {"lessthan", t_order<-2>},
      {"<", t_order<-2>},
      {"le", t_order<-1>},
      {"<=", t_order<-1>},
      {"ge", t_order<1>},
      {">=", t_order<1>},
      {"gt", t_order<2>},
      {"greaterthan", t_order<2>},
      {">", t_order<2>},
      {"sameas", t_sameas},
      {"in", t_in},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
  };
  const auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

bool has_method(const Value& self, std::string_view name) {
  if (self.is_string()) return contains(kStringMethods, name);
  if (self.is_mapping()) return contains(kDictMethods, name);
  if (self.is_list()) return contains(kListMethods, name);
  return false;
}

Result<Value> call_method(Interp& in, const Value& self, std::string_view name, Args& args) {
  STRATA_TRY(in.count_steps(1));
  if (self.is_string()) return string_method(in, self.str(), name, args);
  if (self.is_mapping()) {
    const auto& items = self.dict_obj().items;
    if (name == "get") {
      const Value& key = arg(args, 0, "key", kUndef);
      if (key.is_string()) {
        if (const Value* v = self.dict_obj().find(key.str())) return *v;
      }
      return arg(args, 1, "default", kNone);
    }
    std::vector<Value> out;
    for (const auto& [k, v] : items) {
      if (name == "keys") {
        out.push_back(Value::string(k));
      } else if (name == "values") {
        out.push_back(v);
      } else {
        out.push_back(Value::tuple({Value::string(k), v}));
      }
    }
    return in.make_list(std::move(out));
  }
  if (self.is_list()) {
    const Value& x = arg(args, 0, "value", kUndef);
    const auto& items = self.items();
    if (name == "count") {
      return Value::integer(std::count_if(items.begin(), items.end(), [&](const Value& y) { return equals(x, y); }));
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (equals(items[i], x)) return Value::integer(static_cast<int64_t>(i));
    }
    return make_error("{} is not in list", repr(x));
  }
  return make_error("'{}' object has no method '{}'", type_name(self), name);
}

Value find_global(std::string_view name) {
  static const std::map<std::string, Value, std::less<>> kGlobals = {
      {"range", Value::callable("range", g_range)},
      {"namespace", Value::callable("namespace", g_namespace)},
      {"dict", Value::callable("dict", g_dict)},
      {"raise_exception", Value::callable("raise_exception", g_raise_exception)},
      {"strftime_now", Value::callable("strftime_now", g_strftime_now)},
      {"joiner", Value::callable("joiner", g_joiner)},
  };
  const auto it = kGlobals.find(name);
  return it == kGlobals.end() ? Value() : it->second;
}

// ---- string helpers -----------------------------------------------------------------------------

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right) {
  if (chars.is_none() || chars.is_undefined()) {
    size_t b = 0, e = s.size();
    if (left) {
      while (b < e && is_py_space(static_cast<unsigned char>(s[b]))) ++b;
    }
    if (right) {
      while (e > b && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
    }
    return std::string(s.substr(b, e - b));
  }
  const std::string set_text = to_str(chars);
  const auto set = utf8_chars(set_text);
  const auto cs = utf8_chars(s);
  auto in_set = [&](std::string_view c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cs.size();
  if (left) {
    while (b < e && in_set(cs[b])) ++b;
  }
  if (right) {
    while (e > b && in_set(cs[e - 1])) --e;
  }
  std::string out;
  for (size_t i = b; i < e; ++i) out.append(cs[i]);
  return out;
}

Result<std::string> py_replace(Interp& in, std::string_view s, std::string_view old, std::string_view repl,
                               int64_t count) {
  std::string out;
  int64_t n = 0;
  if (old.empty()) {  // Python inserts the replacement around every character
    const auto cs = utf8_chars(s);
    for (size_t i = 0; i <= cs.size(); ++i) {
      if (count < 0 || n < count) {
        out.append(repl);
        ++n;
      }
      if (i < cs.size()) out.append(cs[i]);
      STRATA_TRY(in.check_string_size(out.size()));
    }
    return out;
  }
  size_t start = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(repl);
    STRATA_TRY(in.check_string_size(out.size()));
    start = at + old.size();
    ++n;
  }
  out.append(s.substr(start));
  STRATA_TRY(in.check_string_size(out.size()));
  return out;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out = ascii_lower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

std::string title_case(std::string_view s, bool jinja_words) {
  std::string out;
  bool word_start = true;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    const bool letter = std::isalpha(u) || u >= 0x80;
    bool boundary;
    if (jinja_words) {
      boundary = is_py_space(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    } else {
      boundary = !letter;
    }
    if (boundary) {
      out += c;
      word_start = true;
      continue;
    }
    const std::string one(1, c);
    out += word_start ? ascii_upper(one) : ascii_lower(one);
    word_start = false;
  }
  return out;
}

}  // namespace strata::text::jinja
