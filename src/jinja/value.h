// Values of the Jinja interpreter used for chat templates (see chat_template.h). They follow Python's
// semantics where templates can observe them: str()/repr() spelling, truthiness, == across int/float/bool,
// ordering, insertion-ordered dicts, json.dumps output for `tojson`. Lists and dicts are immutable once
// built (as in transformers' ImmutableSandboxedEnvironment), except namespaces (`namespace(...)`, the only
// objects `set ns.attr = ...` may change) and the interpreter's own `loop` object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace strata::jinja {

class Interp;
class Value;

enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };

struct ListObj {
  std::vector<Value> items;
  bool is_tuple = false;  // printed as (a, b); otherwise a list in every respect
  int depth = 1;          // nesting depth (1 + deepest child); bounded so recursion over values stays shallow
};

struct DictObj {
  std::vector<std::pair<std::string, Value>> items;  // insertion order, keys unique
  bool is_namespace = false;                         // made by namespace(); attribute-assignable
  int depth = 1;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
};

// Call arguments: positional, then keyword.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

using NativeFn = std::function<Result<Value>(Interp&, Args&)>;

struct CallableObj {
  std::string name;
  NativeFn fn;
};

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined(std::string hint = "");
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value list(std::vector<Value> items);  // depth computed from the items
  static Value tuple(std::vector<Value> items);
  // Later duplicates win; keys_unique skips that check (the caller guarantees distinct keys).
  static Value dict(std::vector<std::pair<std::string, Value>> items, bool keys_unique = false);
  static Value namespace_obj(std::vector<std::pair<std::string, Value>> items);
  static Value callable(std::string name, NativeFn fn);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::Undefined; }
  bool is_none() const { return type_ == Type::None; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_int() const { return type_ == Type::Int; }
  bool is_float() const { return type_ == Type::Float; }
  bool is_number() const { return type_ == Type::Int || type_ == Type::Float || type_ == Type::Bool; }
  bool is_string() const { return type_ == Type::String; }
  bool is_list() const { return type_ == Type::List; }
  bool is_dict() const { return type_ == Type::Dict; }
  bool is_namespace() const { return type_ == Type::Dict && dict_obj().is_namespace; }
  bool is_mapping() const { return type_ == Type::Dict && !dict_obj().is_namespace; }
  bool is_callable() const { return type_ == Type::Callable; }

  bool as_bool() const { return scalar_.b; }
  int64_t as_int() const { return type_ == Type::Bool ? (scalar_.b ? 1 : 0) : scalar_.i; }
  double as_float() const;                    // any number
  const std::string& str() const;             // String
  const std::string& undefined_hint() const;  // Undefined: the name or access that produced it
  const std::vector<Value>& items() const { return list_obj().items; }  // List
  const ListObj& list_obj() const { return *static_cast<const ListObj*>(ptr_.get()); }
  const DictObj& dict_obj() const { return *static_cast<const DictObj*>(ptr_.get()); }
  // In-place changes: namespace attributes, and the interpreter's own loop object.
  DictObj& mutable_dict() const { return *static_cast<DictObj*>(ptr_.get()); }
  const CallableObj& callable_obj() const { return *static_cast<const CallableObj*>(ptr_.get()); }
  const void* identity() const { return ptr_.get(); }
  int depth() const;  // 0 for scalars

 private:
  Type type_ = Type::Undefined;
  union Scalar {
    bool b;
    int64_t i;
    double f;
  } scalar_{.i = 0};
  std::shared_ptr<void> ptr_;  // std::string, ListObj, DictObj or CallableObj by type
};

// Python semantics.
bool truthy(const Value& v);
// The steps equals/compare may take, in elements visited (plus bytes / 64 of compared strings). When `left`
// runs out the walk stops early with a meaningless result; the interpreter turns that into its step-limit
// error, so comparing deep or shared structures cannot run unbounded.
struct StepBudget {
  int64_t left = INT64_MAX;
  bool take(int64_t n) {
    left -= n;
    return left >= 0;
  }
};
std::string type_name(const Value& v);  // Python-ish: 'str', 'int', 'dict', 'undefined', ...
std::string repr(const Value& v);
std::string format_float(double f);  // Python repr of a float
bool equals(const Value& a, const Value& b);
bool equals(const Value& a, const Value& b, StepBudget& work);
// <0, 0, >0; an error when the types cannot be ordered (as Python's TypeError).
Result<int> compare(const Value& a, const Value& b);
Result<int> compare(const Value& a, const Value& b, StepBudget& work);
// str(v) / repr(v) appended to `out`; false (output incomplete) once `out` would grow past `max` bytes.
// `values` (if given) counts the values written.
bool str_into(const Value& v, std::string& out, size_t max, size_t* values = nullptr);
bool repr_into(const Value& v, std::string& out, size_t max, size_t* values = nullptr);
// repr(v) cut to about `max` bytes, for error messages.
std::string short_repr(const Value& v, size_t max = 120);

// Python json.dumps(v, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
struct JsonStyle {
  bool pretty = false;          // indent given
  std::string indent;           // one level of indentation when pretty
  std::string item_sep = ", ";  // Python's defaults: ", " compact, "," pretty
  std::string key_sep = ": ";
  bool sort_keys = false;
};
// Refuses (an error naming max_size) before the output would grow past max_size bytes.
// `values` (if given) counts the values written, also when it fails.
Result<std::string> to_json(const Value& v, const JsonStyle& style, size_t max_size, size_t* values = nullptr);
Value from_json(const nlohmann::ordered_json& j);
// Parses JSON text (nesting at most max_depth deep) into a Value.
Result<Value> parse_json(std::string_view text, int max_depth);

// UTF-8 code points as byte ranges (an invalid byte is its own one-byte "character"; nothing is lost).
std::vector<std::string_view> utf8_chars(std::string_view s);
size_t utf8_length(std::string_view s);
// Byte length of the character starting at byte i (i < s.size()), as utf8_chars splits it.
size_t utf8_char_len(std::string_view s, size_t i);
// Start of the character that ends at byte `end` (0 < end <= s.size(), `end` a character boundary).
size_t utf8_prev_start(std::string_view s, size_t end);

}  // namespace strata::jinja
