#include "jinja/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <unordered_map>

namespace strata::jinja {

namespace {

const std::string kEmpty;

int child_depth(const Value& v) { return v.depth(); }

// Python dict construction: a key keeps its first position and takes its last value. Hashed, so a
// dict of many keys is built in linear time.
std::vector<std::pair<std::string, Value>> dedup(std::vector<std::pair<std::string, Value>> items) {
  std::unordered_map<std::string_view, size_t> position;
  std::vector<size_t> source;  // for each output entry, the input entry whose value it takes
  position.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    auto [it, inserted] = position.emplace(items[i].first, source.size());
    if (inserted) {
      source.push_back(i);
    } else {
      source[it->second] = i;
    }
  }
  if (source.size() == items.size()) return items;
  position.clear();  // its keys view `items`, about to be moved from
  std::vector<std::pair<std::string, Value>> out;
  out.reserve(source.size());
  for (size_t i : source) out.push_back(std::move(items[i]));
  return out;
}

}  // namespace

const Value* DictObj::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictObj::set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.type_ = Type::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::Bool;
  v.scalar_.b = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.type_ = Type::Int;
  v.scalar_.i = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.type_ = Type::Float;
  v.scalar_.f = f;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.type_ = Type::String;
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items) {
  auto obj = std::make_shared<ListObj>();
  int depth = 0;
  for (const auto& item : items) depth = std::max(depth, child_depth(item));
  obj->depth = depth + 1;
  obj->items = std::move(items);
  Value v;
  v.type_ = Type::List;
  v.ptr_ = std::move(obj);
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  static_cast<ListObj*>(v.ptr_.get())->is_tuple = true;
  return v;
}

Value Value::dict(std::vector<std::pair<std::string, Value>> items, bool keys_unique) {
  auto obj = std::make_shared<DictObj>();
  int depth = 0;
  for (const auto& [k, val] : items) depth = std::max(depth, child_depth(val));
  obj->items = keys_unique ? std::move(items) : dedup(std::move(items));
  obj->depth = depth + 1;
  Value v;
  v.type_ = Type::Dict;
  v.ptr_ = std::move(obj);
  return v;
}

Value Value::namespace_obj(std::vector<std::pair<std::string, Value>> items) {
  auto obj = std::make_shared<DictObj>();
  obj->items = dedup(std::move(items));
  obj->is_namespace = true;
  obj->depth = 1;  // printing, comparing and serialising never look inside a namespace
  Value v;
  v.type_ = Type::Dict;
  v.ptr_ = std::move(obj);
  return v;
}

Value Value::callable(std::string name, NativeFn fn) {
  Value v;
  v.type_ = Type::Callable;
  v.ptr_ = std::make_shared<CallableObj>(CallableObj{std::move(name), std::move(fn)});
  return v;
}

double Value::as_float() const {
  switch (type_) {
    case Type::Float: return scalar_.f;
    case Type::Int: return static_cast<double>(scalar_.i);
    case Type::Bool: return scalar_.b ? 1.0 : 0.0;
    default: return 0.0;
  }
}

const std::string& Value::str() const {
  if (type_ != Type::String) return kEmpty;
  return *static_cast<const std::string*>(ptr_.get());
}

const std::string& Value::undefined_hint() const {
  if (type_ != Type::Undefined || !ptr_) return kEmpty;
  return *static_cast<const std::string*>(ptr_.get());
}

int Value::depth() const {
  if (type_ == Type::List) return list_obj().depth;
  if (type_ == Type::Dict) return dict_obj().depth;
  return 0;
}

bool truthy(const Value& v) {
  switch (v.type()) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool: return v.as_bool();
    case Type::Int: return v.as_int() != 0;
    case Type::Float: return v.as_float() != 0.0;
    case Type::String: return !v.str().empty();
    case Type::List: return !v.items().empty();
    case Type::Dict: return v.is_namespace() || !v.dict_obj().items.empty();
    case Type::Callable: return true;
  }
  return false;
}

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return "undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::List: return "list";
    case Type::Dict: return v.is_namespace() ? "Namespace" : "dict";
    case Type::Callable: return "function";
  }
  return "?";
}

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  std::string s = fmt::format("{}", f);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

// Python's repr of a str; false when `out` would pass `max` bytes (checked before appending).
bool repr_string(const std::string& s, std::string& out, size_t max) {
  // The longest escape is 4 bytes per input byte (\xNN), plus the quotes.
  if (s.size() > max / 4 && out.size() + s.size() + 2 > max) return false;
  if (out.size() + 4 * s.size() + 2 > max) {
    size_t need = 2;
    for (unsigned char c : s) need += (c < 0x20 || c == 0x7f) ? 4 : (c == '\\' || c == '\'' || c == '"') ? 2 : 1;
    if (out.size() + need > max) return false;
  }
  // Python picks single quotes unless the text has a single quote and no double quote.
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  out += q;
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == static_cast<unsigned char>(q)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += q;
  return true;
}

bool append_bounded(std::string& out, std::string_view text, size_t max) {
  if (text.size() > max || out.size() > max - text.size()) return false;
  out.append(text);
  return true;
}

}  // namespace

bool repr_into(const Value& v, std::string& out, size_t max, size_t* values) {
  if (values) ++*values;
  switch (v.type()) {
    case Type::String: return repr_string(v.str(), out, max);
    case Type::List: {
      const bool tuple = v.list_obj().is_tuple;
      if (!append_bounded(out, tuple ? "(" : "[", max)) return false;
      bool first = true;
      for (const auto& item : v.items()) {
        if (!first && !append_bounded(out, ", ", max)) return false;
        first = false;
        if (!repr_into(item, out, max, values)) return false;
      }
      if (tuple && v.items().size() == 1 && !append_bounded(out, ",", max)) return false;
      return append_bounded(out, tuple ? ")" : "]", max);
    }
    case Type::Dict: {
      if (v.is_namespace()) return append_bounded(out, "<Namespace>", max);
      if (!append_bounded(out, "{", max)) return false;
      bool first = true;
      for (const auto& [k, item] : v.dict_obj().items) {
        if (!first && !append_bounded(out, ", ", max)) return false;
        first = false;
        if (!repr_string(k, out, max) || !append_bounded(out, ": ", max) || !repr_into(item, out, max, values)) return false;
      }
      return append_bounded(out, "}", max);
    }
    default: return str_into(v, out, max, nullptr);
  }
}

bool str_into(const Value& v, std::string& out, size_t max, size_t* values) {
  switch (v.type()) {
    case Type::Undefined: return true;
    case Type::None: return append_bounded(out, "None", max);
    case Type::Bool: return append_bounded(out, v.as_bool() ? "True" : "False", max);
    case Type::Int: return append_bounded(out, std::to_string(v.as_int()), max);
    case Type::Float: return append_bounded(out, format_float(v.as_float()), max);
    case Type::String: return append_bounded(out, v.str(), max);
    case Type::List:
    case Type::Dict: return repr_into(v, out, max, values);
    case Type::Callable: return append_bounded(out, "<function " + v.callable_obj().name + ">", max);
  }
  return true;
}

std::string repr(const Value& v) {
  std::string out;
  repr_into(v, out, SIZE_MAX, nullptr);
  return out;
}

std::string short_repr(const Value& v, size_t max) {
  std::string out;
  if (!repr_into(v, out, max, nullptr)) out += "...";
  return out;
}

bool equals(const Value& a, const Value& b) {
  StepBudget unbounded;
  return equals(a, b, unbounded);
}

bool equals(const Value& a, const Value& b, StepBudget& work) {
  if (!work.take(1)) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::Undefined:
    case Type::None: return true;
    case Type::String:
      if (a.str().size() != b.str().size()) return false;
      return work.take(static_cast<int64_t>(a.str().size() / 64)) && a.str() == b.str();
    case Type::List: {
      if (a.identity() == b.identity()) return true;  // as Python: a container equals itself
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i], work)) return false;
      }
      return true;
    }
    case Type::Dict: {
      if (a.identity() == b.identity()) return true;
      if (a.is_namespace() || b.is_namespace()) return false;
      const auto& x = a.dict_obj().items;
      const auto& y = b.dict_obj();
      if (x.size() != y.items.size()) return false;
      for (const auto& [k, val] : x) {
        if (!work.take(static_cast<int64_t>(y.items.size() / 16))) return false;  // find() is a linear scan
        const Value* other = y.find(k);
        if (!other || !equals(val, *other, work)) return false;
      }
      return true;
    }
    case Type::Callable: return a.identity() == b.identity();
    default: return false;
  }
}

Result<int> compare(const Value& a, const Value& b) {
  StepBudget unbounded;
  return compare(a, b, unbounded);
}

Result<int> compare(const Value& a, const Value& b, StepBudget& work) {
  if (!work.take(1)) return 0;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const size_t n = std::min(a.str().size(), b.str().size());
    if (!work.take(static_cast<int64_t>(n / 64))) return 0;
    const int c = a.str().compare(b.str());  // byte order == code point order for UTF-8
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    if (a.identity() == b.identity()) return 0;
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i], work)) continue;
      if (work.left < 0) return 0;
      return compare(x[i], y[i], work);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return make_error("cannot order a value of type '{}' against one of type '{}'", type_name(a), type_name(b));
}

// ---- JSON -------------------------------------------------------------------------------------------

namespace {

void json_escape(std::string_view s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);  // ensure_ascii=False: everything else as is
        }
    }
  }
  out += '"';
}

// Bytes json_escape appends for `s`.
size_t json_escaped_size(std::string_view s) {
  size_t n = 2;
  for (unsigned char c : s) {
    const bool short_escape = c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f';
    n += short_escape ? 2 : c < 0x20 ? 6 : 1;
  }
  return n;
}

// Checks every append against max_size first, so the output never grows past it.
struct JsonWriter {
  const JsonStyle& style;
  size_t max_size;
  std::string out;
  size_t values = 0;

  Status room(size_t n) const {
    if (n > max_size || out.size() > max_size - n) {
      return make_error("tojson output would exceed the size limit of {} bytes", max_size);
    }
    return ok_status();
  }
  Status put(std::string_view text) {
    STRATA_TRY(room(text.size()));
    out.append(text);
    return ok_status();
  }
  Status put_string(std::string_view s) {
    STRATA_TRY(room(json_escaped_size(s)));
    json_escape(s, out);
    return ok_status();
  }
  Status newline(int level) {
    size_t n = 0;
    if (__builtin_mul_overflow(static_cast<size_t>(level), style.indent.size(), &n) || n == SIZE_MAX) {
      return room(SIZE_MAX);
    }
    STRATA_TRY(room(n + 1));
    out += '\n';
    for (int i = 0; i < level; ++i) out += style.indent;
    return ok_status();
  }
  Status separator(size_t i, int level) {
    if (i) STRATA_TRY(put(style.item_sep));
    if (style.pretty) STRATA_TRY(newline(level + 1));
    return ok_status();
  }

  Status write(const Value& v, int level) {
    ++values;
    switch (v.type()) {
      case Type::None: return put("null");
      case Type::Bool: return put(v.as_bool() ? "true" : "false");
      case Type::Int: return put(std::to_string(v.as_int()));
      case Type::Float: {
        const double f = v.as_float();
        if (std::isnan(f)) return put("NaN");
        if (std::isinf(f)) return put(f < 0 ? "-Infinity" : "Infinity");
        return put(format_float(f));
      }
      case Type::String: return put_string(v.str());
      case Type::List: {
        const auto& items = v.items();
        if (items.empty()) return put("[]");
        STRATA_TRY(put("["));
        for (size_t i = 0; i < items.size(); ++i) {
          STRATA_TRY(separator(i, level));
          STRATA_TRY(write(items[i], level + 1));
        }
        if (style.pretty) STRATA_TRY(newline(level));
        return put("]");
      }
      case Type::Dict: return write_dict(v, level);
      case Type::Undefined: return make_error("Object of type Undefined is not JSON serializable");
      case Type::Callable: return make_error("Object of type function is not JSON serializable");
    }
    return ok_status();
  }

  Status write_dict(const Value& v, int level) {
    if (v.is_namespace()) return make_error("Object of type Namespace is not JSON serializable");
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& e : v.dict_obj().items) entries.push_back(&e);
    if (style.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
    }
    if (entries.empty()) return put("{}");
    STRATA_TRY(put("{"));
    for (size_t i = 0; i < entries.size(); ++i) {
      STRATA_TRY(separator(i, level));
      STRATA_TRY(put_string(entries[i]->first));
      STRATA_TRY(put(style.key_sep));
      STRATA_TRY(write(entries[i]->second, level + 1));
    }
    if (style.pretty) STRATA_TRY(newline(level));
    return put("}");
  }
};

}  // namespace

Result<std::string> to_json(const Value& v, const JsonStyle& style, size_t max_size, size_t* values) {
  JsonWriter w{style, max_size, {}};
  const Status s = w.write(v, 0);
  if (values) *values = w.values;
  STRATA_TRY(s);
  return std::move(w.out);
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<std::string, Value>> items;
      items.reserve(j.size());
      for (const auto& [k, e] : j.items()) items.emplace_back(k, from_json(e));
      return Value::dict(std::move(items), /*keys_unique=*/true);
    }
    default: return Value::none();
  }
}

Result<Value> parse_json(std::string_view text, int max_depth) {
  // Bound the nesting before handing the text to the parser, so values stay shallow.
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return make_error("JSON nested deeper than {} levels", max_depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  auto j = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error("invalid JSON");
  return from_json(j);
}

size_t utf8_char_len(std::string_view s, size_t i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  const size_t len = lead < 0x80 ? 1 : lead < 0xC0 ? 0 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 1;
  for (size_t k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return len;
}

size_t utf8_prev_start(std::string_view s, size_t end) {
  // A continuation byte belongs to the nearest lead byte before it only when that lead's sequence is
  // valid and ends exactly here; otherwise (as utf8_chars splits) it is a character of its own.
  for (size_t back = 1; back <= 4 && back <= end; ++back) {
    const size_t j = end - back;
    if ((static_cast<unsigned char>(s[j]) & 0xC0) != 0x80) {
      return (back > 1 && utf8_char_len(s, j) == back) ? j : end - 1;
    }
  }
  return end - 1;
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_char_len(s, i);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    i += static_cast<unsigned char>(s[i]) < 0x80 ? 1 : utf8_char_len(s, i);
  }
  return n;
}

}  // namespace strata::jinja
