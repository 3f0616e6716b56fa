// The interpreter's internal interface: what the built-in filters, tests, methods and globals
// (jinja_builtins.cpp) need from the evaluator (jinja_eval.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/jinja.h"
#include "text/jinja_ast.h"
#include "text/jinja_value.h"

namespace strata::text::jinja {

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

  // Building values within the limits (list length, nesting depth, string size).
  Result<Value> make_list(std::vector<Value> items);
  Result<Value> make_dict(std::vector<std::pair<std::string, Value>> items);
  Result<Value> make_string(std::string s);
  Status check_string_size(size_t size) const;
  Value make_namespace(std::vector<std::pair<std::string, Value>> items);

  Result<Value> call(const Value& fn, Args& args);
  Result<Value> apply_filter(std::string_view name, const Value& input, Args& args);
  Result<bool> apply_test(std::string_view name, const Value& value, Args& args);
  // obj.name (attribute first, then item) and obj[key] (item first, then attribute), as Jinja.
  Result<Value> get_attr(const Value& obj, std::string_view name);
  Result<Value> get_item(const Value& obj, const Value& key);
  // The elements a for loop visits: list items, dict keys, string characters; undefined is empty.
  Result<std::vector<Value>> iterate(const Value& v);
  Status count_steps(int64_t n);
  Result<Value> call_macro(const Node& macro, Args& args);

 private:
  Result<Flow> exec_body(const Body& body, Frame& frame, std::string& out);
  Result<Flow> exec(const Node& node, Frame& frame, std::string& out);
  Result<Flow> exec_for(const Node& node, Frame& frame, std::string& out);
  Status exec_set(const Node& node, Frame& frame);
  Result<Value> eval(const Expr& e, Frame& frame);
  Result<Value> eval_inner(const Expr& e, Frame& frame);
  Result<Value> eval_binary(const Expr& e, const Value& a, const Value& b);
  Result<Value> eval_slice(const Expr& e, Frame& frame);
  Result<Value> eval_call(const Expr& e, Frame& frame);
  Status eval_args(const Expr& e, Frame& frame, Args& args);
  Result<Value> apply_filters(const std::vector<ExprPtr>& filters, Value input, Frame& frame);
  Result<Value> lookup(std::string_view name, Frame& frame);
  Status emit(std::string& out, std::string_view text) const;
  Status enter();  // recursion guard; pair with leave()
  void leave() { --depth_; }

  const RenderOptions& opt_;
  Frame* root_ = nullptr;
  int64_t steps_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
  std::vector<Value> namespaces_;  // emptied at the end so reference cycles through them are broken
};

// Built-ins (jinja_builtins.cpp). Each returns false / undefined when the name is unknown.
using FilterFn = Result<Value> (*)(Interp&, const Value& input, Args& args);
using TestFn = Result<bool> (*)(Interp&, const Value& value, Args& args);
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
bool has_method(const Value& self, std::string_view name);
Result<Value> call_method(Interp& in, const Value& self, std::string_view name, Args& args);
Value find_global(std::string_view name);  // range, namespace, dict, raise_exception, strftime_now, ...

// Reads argument `i` (or keyword `name`), or `fallback` when neither was given.
const Value& arg(const Args& args, size_t i, std::string_view name, const Value& fallback);

// Python string helpers shared by filters and methods (ASCII case mapping).
std::string py_strip(std::string_view s, const Value& chars, bool left, bool right);
Result<std::string> py_replace(Interp& in, std::string_view s, std::string_view old, std::string_view repl,
                               int64_t count);
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
// Python str.title() (words are runs of letters), or Jinja's |title (words start after whitespace,
// '-', and opening brackets).
std::string title_case(std::string_view s, bool jinja_words);

}  // namespace strata::text::jinja
