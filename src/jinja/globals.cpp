// Built-in tests, Python methods of str/dict/list, global functions, and the string helpers they share.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>

#include "jinja/interp.h"

namespace strata::jinja {

namespace {

const Value kNone = Value::none();
const Value kUndef = Value::undefined();

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
Result<bool> t_lower(Interp& in, const Value& v, Args&) {
  STRATA_TRY(in.count_bytes(v.str().size()));
  return v.is_string() && is_lower(v.str());
}
Result<bool> t_upper(Interp& in, const Value& v, Args&) {
  STRATA_TRY(in.count_bytes(v.str().size()));
  return v.is_string() && is_upper(v.str());
}
Result<bool> t_escaped(Interp&, const Value&, Args&) { return false; }

Result<const Value*> other(const Args& args, const char* test) {
  const Value& o = arg(args, 0, "other", kUndef);
  if (args.pos.empty() && args.kw.empty()) return make_error("the '{}' test needs an argument", test);
  return &o;
}

Result<bool> t_eq(Interp& in, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* o, other(a, "equalto"));
  return in.equal(v, *o);
}
Result<bool> t_ne(Interp& in, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* o, other(a, "ne"));
  STRATA_ASSIGN(bool eq, in.equal(v, *o));
  return !eq;
}
template <int kWant>  // -2: <, -1: <=, 1: >=, 2: >
Result<bool> t_order(Interp& in, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* o, other(a, "comparison"));
  STRATA_ASSIGN(int c, in.order(v, *o));
  switch (kWant) {
    case -2: return c < 0;
    case -1: return c <= 0;
    case 1: return c >= 0;
    default: return c > 0;
  }
}
Result<bool> t_sameas(Interp& in, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* o, other(a, "sameas"));
  if (v.type() != o->type()) return false;
  if (v.is_list() || v.is_dict() || v.is_callable()) return v.identity() == o->identity();
  return in.equal(v, *o);
}
Result<bool> t_in(Interp& in, const Value& v, Args& a) {
  STRATA_ASSIGN(const Value* seq, other(a, "in"));
  switch (seq->type()) {
    case Type::String:
      if (!v.is_string()) return make_error("'in <string>' requires a string as left operand, not '{}'", type_name(v));
      STRATA_TRY(in.count_bytes(seq->str().size() + v.str().size()));
      return find_sub(seq->str(), v.str()) != std::string::npos;
    case Type::List:
      for (const Value& x : seq->items()) {
        STRATA_ASSIGN(bool eq, in.equal(x, v));
        if (eq) return true;
      }
      return false;
    case Type::Undefined: return false;
    case Type::Dict:
      if (!seq->is_namespace()) {
        STRATA_TRY(in.count_steps(static_cast<int64_t>(seq->dict_obj().items.size() / 16)));
        return v.is_string() && seq->dict_obj().find(v.str()) != nullptr;
      }
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

// startswith/endswith with a string or a list of strings; an error for anything else.
Result<bool> affix_match(Interp& in, std::string_view s, const Value& affix, bool at_end) {
  auto one = [&](const Value& p) -> Result<bool> {
    if (!p.is_string()) return false;
    const std::string& t = p.str();
    STRATA_TRY(in.count_bytes(t.size()));
    if (t.size() > s.size()) return false;
    return at_end ? s.substr(s.size() - t.size()) == t : s.substr(0, t.size()) == t;
  };
  if (affix.is_string()) return one(affix);
  if (!affix.is_list()) return make_error("{} needs a string or a list of strings", at_end ? "endswith" : "startswith");
  for (const Value& p : affix.items()) {
    STRATA_TRY(in.count_steps(1));
    STRATA_ASSIGN(bool hit, one(p));
    if (hit) return true;
  }
  return false;
}

Result<int64_t> char_index(Interp& in, std::string_view s, size_t byte_pos) {
  STRATA_TRY(in.count_bytes(byte_pos));
  return static_cast<int64_t>(utf8_length(s.substr(0, byte_pos)));
}

// find, rfind, index, rindex, count.
Result<Value> search_method(Interp& in, std::string_view s, std::string_view name, const Value& a0) {
  if (!a0.is_string()) return make_error("{} needs a string argument", name);
  const std::string& sub = a0.str();
  STRATA_TRY(in.count_bytes(s.size() + sub.size()));
  if (name == "count") {
    if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
    int64_t n = 0;
    for (size_t at = find_sub(s, sub); at != std::string::npos; at = find_sub(s, sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  const bool from_right = name[0] == 'r';
  if (from_right) STRATA_TRY(in.reserve_bytes(s.size() + sub.size()));  // rfind_sub's reversed copies
  const size_t at = from_right ? rfind_sub(s, sub) : find_sub(s, sub);
  if (at == std::string::npos) {
    if (name == "index" || name == "rindex") return make_error("substring not found");
    return Value::integer(-1);
  }
  STRATA_ASSIGN(int64_t i, char_index(in, s, at));
  return Value::integer(i);
}

Result<Value> strip_method(Interp& in, std::string_view s, const Value& chars, bool left, bool right) {
  STRATA_ASSIGN(std::string_view kept, py_strip(in, s, chars, left, right));
  STRATA_TRY(in.reserve_string(kept.size()));
  return in.make_string(std::string(kept), true);
}

Result<Value> string_method(Interp& in, const std::string& s, std::string_view name, Args& args) {
  const Value& a0 = arg(args, 0, "", kNone);
  if (name == "startswith" || name == "endswith") {
    STRATA_ASSIGN(bool r, affix_match(in, s, a0, name == "endswith"));
    return Value::boolean(r);
  }
  if (name == "split" || name == "rsplit") {
    const Value& sep = arg(args, 0, "sep", kNone);
    const Value& maxsplit = arg(args, 1, "maxsplit", kNone);
    return py_split(in, s, sep, maxsplit.is_int() ? maxsplit.as_int() : -1, name == "rsplit");
  }
  const Value& chars = arg(args, 0, "chars", kNone);
  if (name == "strip") return strip_method(in, s, chars, true, true);
  if (name == "lstrip") return strip_method(in, s, chars, true, false);
  if (name == "rstrip") return strip_method(in, s, chars, false, true);
  if (name == "upper") return map_case(in, s, CaseMap::Upper);
  if (name == "lower") return map_case(in, s, CaseMap::Lower);
  if (name == "title") return map_case(in, s, CaseMap::Title);
  if (name == "capitalize") return map_case(in, s, CaseMap::Capitalize);
  if (name == "replace") {
    const Value& count = arg(args, 2, "count", kNone);
    if (!a0.is_string() || !arg(args, 1, "", kNone).is_string()) return make_error("replace needs two strings");
    return py_replace(in, s, a0.str(), args.pos[1].str(), count.is_int() ? count.as_int() : -1);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return search_method(in, s, name, a0);
  }
  if (name == "join") {
    STRATA_ASSIGN(auto items, in.iterate(a0));
    return py_join(in, s, items, kNone, /*strings_only=*/true);
  }
  if (name == "splitlines") return py_splitlines(in, s);
  STRATA_TRY(in.count_bytes(s.size()));
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
    return in.limit_error(
        fmt::format("range() of {:.0f} elements exceeds the limit of {} (max_list)", count, in.limits().max_list));
  }
  std::vector<Value> items;
  const auto n = static_cast<int64_t>(std::max(0.0, count));
  STRATA_TRY(in.reserve_list(static_cast<size_t>(n)));
  items.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    int64_t offset = 0, v = 0;
    if (__builtin_mul_overflow(k, step, &offset) || __builtin_add_overflow(start, offset, &v)) break;
    if (step > 0 ? v >= stop : v <= stop) break;
    items.push_back(Value::integer(v));
  }
  return in.make_list(std::move(items), true);
}

Result<Value> g_namespace(Interp& in, Args& args) {
  std::vector<std::pair<std::string, Value>> items;
  if (!args.pos.empty()) {
    if (args.pos.size() > 1 || !args.pos[0].is_mapping()) {
      return make_error("namespace() takes keyword arguments or one dict");
    }
    const auto& source = args.pos[0].dict_obj().items;
    size_t keys = 0;
    for (const auto& kv : source) keys += kv.first.size();
    STRATA_TRY(in.count_bytes(keys));
    STRATA_TRY(in.reserve_bytes(source.size() * Interp::kEntryBytes + keys));
    items = source;
  }
  for (const auto& kv : args.kw) items.push_back(kv);
  STRATA_TRY(in.count_steps(static_cast<int64_t>(items.size() / 16)));
  return in.make_namespace(std::move(items));
}

Result<Value> g_dict(Interp& in, Args& args) {
  std::vector<std::pair<std::string, Value>> items;
  if (!args.pos.empty()) {
    if (args.pos.size() > 1 || !args.pos[0].is_mapping()) {
      return make_error("dict() takes keyword arguments or one dict");
    }
    items = args.pos[0].dict_obj().items;  // the keys are shared copies: make_dict charges them
  }
  for (const auto& kv : args.kw) items.push_back(kv);
  return in.make_dict(std::move(items));
}

Result<Value> g_raise_exception(Interp& in, Args& args) {
  std::string holder;
  STRATA_ASSIGN(std::string_view message, in.text(arg(args, 0, "message", kNone), holder));
  return make_error("template raised an error: {}", message);
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
  return in.make_string(std::string(buf, n));
}

Result<Value> g_joiner(Interp& in, Args& args) {
  static const Value kComma = Value::string(", ");
  static const Value kNothing = Value::string("");
  STRATA_ASSIGN(Value sep, in.stringify(arg(args, 0, "sep", kComma)));
  auto used = std::make_shared<bool>(false);
  return Value::callable("joiner", [sep, used](Interp&, Args&) -> Result<Value> {
    if (!*used) {
      *used = true;
      return kNothing;
    }
    return sep;  // shared, not copied
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
      STRATA_TRY(in.count_steps(static_cast<int64_t>(items.size() / 16)));  // find() is a linear scan
      const Value& key = arg(args, 0, "key", kUndef);
      if (key.is_string()) {
        if (const Value* v = self.dict_obj().find(key.str())) return *v;
      }
      return arg(args, 1, "default", kNone);
    }
    if (name == "items") return dict_items(in, self);
    STRATA_TRY(in.reserve_list(items.size()));
    if (name == "keys") {
      size_t bytes = 0;
      for (const auto& kv : items) bytes += kv.first.size();
      STRATA_TRY(in.reserve_strings(items.size(), bytes));
    }
    std::vector<Value> out;
    out.reserve(items.size());
    for (const auto& [k, v] : items) out.push_back(name == "keys" ? Value::string(k) : v);
    return in.make_list(std::move(out), true);
  }
  if (self.is_list()) {
    const Value& x = arg(args, 0, "value", kUndef);
    const auto& items = self.items();
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      STRATA_ASSIGN(bool eq, in.equal(items[i], x));
      if (eq && name == "index") return Value::integer(static_cast<int64_t>(i));
      n += eq;
    }
    if (name == "count") return Value::integer(n);
    return make_error("{} is not in list", short_repr(x));
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

Result<Value> dict_items(Interp& in, const Value& dict) {
  const auto& items = dict.dict_obj().items;
  // Each pair is a tuple of two values; its key a new string.
  size_t bytes = 0;
  for (const auto& kv : items) bytes += kv.first.size();
  STRATA_TRY(in.reserve_list(items.size()));
  STRATA_TRY(in.reserve_strings(items.size(), bytes));
  STRATA_TRY(in.reserve_bytes(items.size() * (Interp::kObjectBytes + 2 * Interp::kValueBytes)));
  std::vector<Value> pairs;
  pairs.reserve(items.size());
  for (const auto& [k, v] : items) pairs.push_back(Value::tuple({Value::string(k), v}));
  return in.make_list(std::move(pairs), true);
}

}  // namespace strata::jinja
