#include "text/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace strata::text::jinja {

namespace {

const std::string kEmpty;

int child_depth(const Value& v) { return v.depth(); }

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
  if (keys_unique) {
    obj->items = std::move(items);
  } else {
    for (auto& [k, val] : items) obj->set(std::move(k), std::move(val));
  }
  obj->depth = depth + 1;
  Value v;
  v.type_ = Type::Dict;
  v.ptr_ = std::move(obj);
  return v;
}

Value Value::namespace_obj(std::vector<std::pair<std::string, Value>> items) {
  auto obj = std::make_shared<DictObj>();
  for (auto& [k, val] : items) obj->set(std::move(k), std::move(val));
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

std::string repr_string(const std::string& s) {
  // Python picks single quotes unless the text has a single quote and no double quote.
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  std::string out(1, q);
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
  return out;
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.type()) {
    case Type::String: return repr_string(v.str());
    case Type::List: {
      const bool tuple = v.list_obj().is_tuple;
      std::string out = tuple ? "(" : "[";
      bool first = true;
      for (const auto& item : v.items()) {
        if (!first) out += ", ";
        first = false;
        out += repr(item);
      }
      if (tuple && v.items().size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Type::Dict: {
      if (v.is_namespace()) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : v.dict_obj().items) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + repr(item);
      }
      return out + "}";
    }
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return "";
    case Type::None: return "None";
    case Type::Bool: return v.as_bool() ? "True" : "False";
    case Type::Int: return std::to_string(v.as_int());
    case Type::Float: return format_float(v.as_float());
    case Type::String: return v.str();
    case Type::List:
    case Type::Dict: return repr(v);
    case Type::Callable: return "<function " + v.callable_obj().name + ">";
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::Undefined:
    case Type::None: return true;
    case Type::String: return a.str() == b.str();
    case Type::List: {
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Type::Dict: {
      if (a.is_namespace() || b.is_namespace()) return a.identity() == b.identity();
      const auto& x = a.dict_obj().items;
      const auto& y = b.dict_obj();
      if (x.size() != y.items.size()) return false;
      for (const auto& [k, val] : x) {
        const Value* other = y.find(k);
        if (!other || !equals(val, *other)) return false;
      }
      return true;
    }
    case Type::Callable: return a.identity() == b.identity();
    default: return false;
  }
}

Result<int> compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // byte order == code point order for UTF-8
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
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

struct JsonWriter {
  const JsonStyle& style;
  size_t max_size;
  std::string out;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += style.indent;
  }

  Status write(const Value& v, int level) {
    if (out.size() > max_size) return make_error("tojson output exceeds the size limit of {} bytes", max_size);
    switch (v.type()) {
      case Type::None: out += "null"; return ok_status();
      case Type::Bool: out += v.as_bool() ? "true" : "false"; return ok_status();
      case Type::Int: out += std::to_string(v.as_int()); return ok_status();
      case Type::Float: {
        const double f = v.as_float();
        if (std::isnan(f)) {
          out += "NaN";
        } else if (std::isinf(f)) {
          out += f < 0 ? "-Infinity" : "Infinity";
        } else {
          out += format_float(f);
        }
        return ok_status();
      }
      case Type::String: json_escape(v.str(), out); return ok_status();
      case Type::List: {
        const auto& items = v.items();
        if (items.empty()) {
          out += "[]";
          return ok_status();
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += style.item_sep;
          if (style.pretty) newline(level + 1);
          STRATA_TRY(write(items[i], level + 1));
        }
        if (style.pretty) newline(level);
        out += ']';
        return ok_status();
      }
      case Type::Dict: {
        if (v.is_namespace()) return make_error("Object of type Namespace is not JSON serializable");
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : v.dict_obj().items) entries.push_back(&e);
        if (style.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
        }
        if (entries.empty()) {
          out += "{}";
          return ok_status();
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += style.item_sep;
          if (style.pretty) newline(level + 1);
          json_escape(entries[i]->first, out);
          out += style.key_sep;
          STRATA_TRY(write(entries[i]->second, level + 1));
        }
        if (style.pretty) newline(level);
        out += '}';
        return ok_status();
      }
      case Type::Undefined: return make_error("Object of type Undefined is not JSON serializable");
      case Type::Callable: return make_error("Object of type function is not JSON serializable");
    }
    return ok_status();
  }
};

}  // namespace

Result<std::string> to_json(const Value& v, const JsonStyle& style, size_t max_size) {
  JsonWriter w{style, max_size, {}};
  STRATA_TRY(w.write(v, 0));
  if (w.out.size() > max_size) return make_error("tojson output exceeds the size limit of {} bytes", max_size);
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

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    size_t len = lead < 0x80 ? 1 : lead < 0xC0 ? 0 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 0;
    if (len == 0 || i + len > s.size()) {
      len = 1;
    } else {
      for (size_t k = 1; k < len; ++k) {
        if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) {
          len = 1;
          break;
        }
      }
    }
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  for (unsigned char c : s) {
    if (c & 0x80) return utf8_chars(s).size();
  }
  return s.size();
}

}  // namespace strata::text::jinja
