// The interpreter's internal interface: what the built-in filters, tests, methods and globals
// (jinja_filters.cpp, jinja_globals.cpp, jinja_strings.cpp) need from the evaluator (jinja_eval.cpp) and
// its budgets (jinja_budget.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/jinja.h"
#include "jinja/ast.h"
#include "jinja/value.h"

namespace strata::jinja {

struct Frame {
  Frame* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;
  Value* find(std::string_view name) {
    for (auto& [k, v] : vars) {
      if (k == name) return &v;
    }
    return nullptr;
  }
  void set(std::string_view name, Value value) {
    if (Value* v = find(name)) {
      *v = std::move(value);
    } else {
      vars.emplace_back(std::string(name), std::move(value));
    }
  }
};

enum class Flow { Normal, Break, Continue };

class Interp {
 public:
  explicit Interp(const RenderOptions& options) : opt_(options) {}
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  Result<std::string> render(const Program& program, const Vars& vars);

  const Limits& limits() const { return opt_.limits; }
  const RenderOptions& options() const { return opt_; }
  RenderStats stats() const { return {steps_, memory_, limit_exceeded_}; }

  // ---- budgets. A builtin charges steps for its work (count_steps, count_bytes) and, BEFORE it builds
  // a value, reserves the value's size (reserve_string / reserve_list / reserve_bytes): the size is
  // computed first with checked arithmetic, so nothing over a limit is ever allocated.
  static constexpr size_t kBytesPerStep = 64;
  static constexpr size_t kValueBytes = sizeof(Value);
  static constexpr size_t kStringBytes = sizeof(std::string) + 16;  // + its bytes; 16: shared_ptr control block
  static constexpr size_t kObjectBytes = 64;                         // a list or dict, before its elements
  static constexpr size_t kEntryBytes = sizeof(std::pair<std::string, Value>);
  Status count_steps(int64_t n);
  Status count_bytes(size_t bytes) { return count_steps(static_cast<int64_t>(bytes / kBytesPerStep)); }
  Status reserve_bytes(size_t bytes);  // the memory budget (max_memory)
  Status reserve_string(size_t size);  // one string value of `size` bytes: max_output, memory, steps
  Status reserve_list(size_t n);       // one list of n elements: max_list, memory, steps
  // n strings of `bytes` bytes in all (split parts, characters, keys), each its own value.
  Status reserve_strings(size_t n, size_t bytes);
  Error limit_error(std::string message);  // marks the render as stopped by a limit
  Status check_string_size(size_t size);

  // Wrapping built values; `reserved` says the caller reserved them already (otherwise they are charged
  // now). Lists and dicts are checked for length and nesting depth.
  Result<Value> make_list(std::vector<Value> items, bool reserved = false);
  Result<Value> make_dict(std::vector<std::pair<std::string, Value>> items, bool reserved = false);
  Result<Value> make_string(std::string s, bool reserved = false);
  Value make_namespace(std::vector<std::pair<std::string, Value>> items);
  // str(v) within the budget; strings are returned as they are (no copy), other values are converted
  // into `holder`.
  Result<std::string_view> text(const Value& v, std::string& holder);
  Result<Value> stringify(const Value& v);  // str(v) as a value
  // Python == and ordering, charged per element visited (`prepaid`: the first step was charged already,
  // as sorting charges n log2 n comparisons up front).
  Result<bool> equal(const Value& a, const Value& b);
  Result<int> order(const Value& a, const Value& b, bool prepaid = false);

  Result<Value> call(const Value& fn, Args& args);
  Result<Value> apply_filter(std::string_view name, const Value& input, Args& args);
  Result<bool> apply_test(std::string_view name, const Value& value, Args& args);
  // obj.name (attribute first, then item) and obj[key] (item first, then attribute), as Jinja.
  Result<Value> get_attr(const Value& obj, std::string_view name);
  Result<Value> get_item(const Value& obj, const Value& key);
  // The elements a for loop visits: list items, dict keys, string characters; undefined is empty.
  Result<std::vector<Value>> iterate(const Value& v);
  Result<Value> call_macro(const Node& macro, Args& args);

 private:
  Result<Flow> exec_body(const Body& body, Frame& frame, std::string& out);
  Result<Flow> exec(const Node& node, Frame& frame, std::string& out);
  Result<Flow> exec_for(const Node& node, Frame& frame, std::string& out);
  Status exec_set(const Node& node, Frame& frame);
  Result<Value> eval(const Expr& e, Frame& frame);
  Result<Value> eval_inner(const Expr& e, Frame& frame);
  Result<Value> eval_binary(const Expr& e, const Value& a, const Value& b);
  Result<Value> concat(std::string_view x, std::string_view y);
  Result<Value> repeat(const Value& seq, int64_t k);  // seq * k
  Result<Value> eval_slice(const Expr& e, Frame& frame);
  Status eval_args(const Expr& e, Frame& frame, Args& args);
  Result<Value> apply_filters(const std::vector<ExprPtr>& filters, Value input, Frame& frame);
  Result<Value> lookup(std::string_view name, Frame& frame);
  Status emit(std::string& out, std::string_view text);
  Status convert(const Value& v, std::string& out);
  Status enter();  // recursion guard; pair with leave()
  void leave() { --depth_; }

  const RenderOptions& opt_;
  Frame* root_ = nullptr;
  int64_t steps_ = 0;
  size_t memory_ = 0;
  bool limit_exceeded_ = false;
  int depth_ = 0;
  int call_depth_ = 0;
  std::vector<Value> namespaces_;  // emptied at the end so reference cycles through them are broken
};

// Sizes of values about to be built; an overflow is SIZE_MAX, which is over every limit.
inline size_t checked_add(size_t a, size_t b) {
  size_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}
inline size_t checked_mul(size_t a, size_t b) {
  size_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

// Built-ins (jinja_filters.cpp, jinja_globals.cpp). Each returns false / undefined when the name is unknown.
using FilterFn = Result<Value> (*)(Interp&, const Value& input, Args& args);
using TestFn = Result<bool> (*)(Interp&, const Value& value, Args& args);
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
bool has_method(const Value& self, std::string_view name);
Result<Value> call_method(Interp& in, const Value& self, std::string_view name, Args& args);
Value find_global(std::string_view name);  // range, namespace, dict, raise_exception, strftime_now, ...

// Reads argument `i` (or keyword `name`), or `fallback` when neither was given.
const Value& arg(const Args& args, size_t i, std::string_view name, const Value& fallback);

// Python string helpers shared by filters and methods (jinja_strings.cpp; ASCII case mapping). They
// charge their work and reserve their results.
// Linear-time substring search (glibc memmem is two-way): the first match at or after `from`, or npos.
size_t find_sub(std::string_view s, std::string_view sub, size_t from = 0);
// The last match, also linear: it searches reversed copies of both, which the caller reserves.
size_t rfind_sub(std::string_view s, std::string_view sub);
Result<std::string_view> py_strip(Interp& in, std::string_view s, const Value& chars, bool left, bool right);
Result<Value> py_replace(Interp& in, std::string_view s, std::string_view old, std::string_view repl, int64_t count);
Result<Value> py_split(Interp& in, std::string_view s, const Value& sep, int64_t maxsplit, bool from_right);
Result<Value> py_splitlines(Interp& in, std::string_view s);
Result<Value> py_join(Interp& in, std::string_view sep, const std::vector<Value>& items, const Value& attribute,
                      bool strings_only);
enum class CaseMap { Upper, Lower, Capitalize, Title, JinjaTitle };
// Python str.upper/lower/capitalize/title (words are runs of letters), or Jinja's |title (words start
// after whitespace, '-', and opening brackets).
Result<Value> map_case(Interp& in, std::string_view s, CaseMap how);
bool is_lower(std::string_view s);  // Python str.islower()
bool is_upper(std::string_view s);
bool is_py_space(unsigned char c);
// Jinja's attribute getter for map/selectattr/sort/...: "a.b.0" walks items (item first, then attribute).
Result<Value> attr_path(Interp& in, const Value& item, const std::string& path);
Result<Value> dict_items(Interp& in, const Value& dict);  // dict.items() as a list of (key, value) tuples

}  // namespace strata::jinja
