// The tree-walking evaluator: statements, expressions, scoping (a for-loop iteration and a macro call
// get their own frame; if/set do not), Python arithmetic, and the limits that stop hostile templates.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "jinja/interp.h"

namespace strata::jinja {

namespace {

template <typename N>
Error located(const N& n, Error e) {
  if (e.message.rfind("line ", 0) == 0) return e;
  return make_error("line {}, column {}: {}", n.line, n.col, e.message);
}

// A type error that names the undefined operand when there is one (Jinja reports UndefinedError).
Error operand_error(std::string_view op, const Value& a, const Value& b) {
  for (const Value* v : {&a, &b}) {
    if (v->is_undefined()) {
      const std::string& hint = v->undefined_hint();
      return make_error("{} (operand of '{}')", hint.empty() ? "value is undefined" : hint, op);
    }
  }
  return make_error("unsupported operand types for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

Error undefined_error(const Value& v, std::string_view action) {
  const std::string& hint = v.undefined_hint();
  return make_error("{} ({})", hint.empty() ? "value is undefined" : hint, action);
}

}  // namespace

Interp::~Interp() {
  for (const Value& ns : namespaces_) ns.mutable_dict().items.clear();
}

Status Interp::enter() {
  if (++depth_ > opt_.limits.max_recursion) {
    --depth_;
    return limit_error(fmt::format("template evaluation nested deeper than {} levels (max_recursion)",
                                   opt_.limits.max_recursion));
  }
  return ok_status();
}

Result<std::string> Interp::render(const Program& program, const Vars& vars) {
  Frame root;
  for (const auto& [name, value] : vars) root.set(name, value);
  root_ = &root;
  std::string out;
  auto flow = exec_body(program.body, root, out);
  root_ = nullptr;
  if (!flow.ok()) return std::move(flow).error();
  return out;
}

// ---- statements ---------------------------------------------------------------------------------

Result<Flow> Interp::exec_body(const Body& body, Frame& frame, std::string& out) {
  for (const auto& node : body) {
    STRATA_ASSIGN(Flow flow, exec(*node, frame, out));
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Result<Flow> Interp::exec(const Node& n, Frame& frame, std::string& out) {
  STRATA_TRY(count_steps(1 + static_cast<int64_t>(n.text.size() / 256)));
  if (auto s = enter(); !s.ok()) return located(n, std::move(s).error());
  struct Guard {
    Interp* in;
    ~Guard() { in->leave(); }
  } guard{this};
  switch (n.kind) {
    case NodeKind::Text: {
      if (auto s = emit(out, n.text); !s.ok()) return located(n, std::move(s).error());
      return Flow::Normal;
    }
    case NodeKind::Output: {
      STRATA_ASSIGN(Value v, eval(*n.expr, frame));
      std::string holder;
      auto t = text(v, holder);
      if (!t.ok()) return located(n, std::move(t).error());
      if (auto s = emit(out, *t); !s.ok()) return located(n, std::move(s).error());
      return Flow::Normal;
    }
    case NodeKind::If: {
      for (const auto& [cond, body] : n.branches) {
        STRATA_ASSIGN(Value c, eval(*cond, frame));
        if (truthy(c)) return exec_body(body, frame, out);
      }
      return exec_body(n.else_body, frame, out);
    }
    case NodeKind::For: return exec_for(n, frame, out);
    case NodeKind::Set: {
      if (auto s = exec_set(n, frame); !s.ok()) return located(n, std::move(s).error());
      return Flow::Normal;
    }
    case NodeKind::SetBlock:
    case NodeKind::FilterBlock: {
      std::string captured;
      STRATA_ASSIGN(Flow flow, exec_body(n.body, frame, captured));
      (void)flow;
      STRATA_TRY(reserve_bytes(kStringBytes));  // the captured text itself was charged as it was emitted
      STRATA_ASSIGN(Value v, apply_filters(n.filters, Value::string(std::move(captured)), frame));
      if (n.kind == NodeKind::SetBlock) {
        frame.set(n.targets[0], std::move(v));
        return Flow::Normal;
      }
      std::string holder;
      auto t = text(v, holder);
      if (!t.ok()) return located(n, std::move(t).error());
      if (auto s = emit(out, *t); !s.ok()) return located(n, std::move(s).error());
      return Flow::Normal;
    }
    case NodeKind::Macro: {
      const Node* macro = &n;
      frame.set(n.text,
                Value::callable(n.text, [macro](Interp& in, Args& args) { return in.call_macro(*macro, args); }));
      return Flow::Normal;
    }
    case NodeKind::Break: return Flow::Break;
    case NodeKind::Continue: return Flow::Continue;
    case NodeKind::Scope: return exec_body(n.body, frame, out);
  }
  return Flow::Normal;
}

namespace {

// The sizes are compared before anything is copied (a long string would otherwise become a list first).
Status unpack(const std::vector<std::string>& targets, const Value& v, Frame& frame) {
  if (targets.size() == 1) {
    frame.set(targets[0], v);
    return ok_status();
  }
  size_t n = 0;
  if (v.is_list()) {
    n = v.items().size();
  } else if (v.is_string()) {
    if (v.str().size() > 4 * targets.size()) {
      return make_error("cannot unpack a string of {} bytes into {} names", v.str().size(), targets.size());
    }
    n = utf8_length(v.str());
  } else {
    return make_error("cannot unpack a value of type '{}' into {} names", type_name(v), targets.size());
  }
  if (n != targets.size()) return make_error("cannot unpack {} values into {} names", n, targets.size());
  if (v.is_list()) {
    for (size_t i = 0; i < n; ++i) frame.set(targets[i], v.items()[i]);
    return ok_status();
  }
  const auto chars = utf8_chars(v.str());
  for (size_t i = 0; i < n; ++i) frame.set(targets[i], Value::string(std::string(chars[i])));
  return ok_status();
}

}  // namespace

Status Interp::exec_set(const Node& n, Frame& frame) {
  STRATA_ASSIGN(Value v, eval(*n.expr, frame));
  if (!n.attr.empty()) {
    STRATA_ASSIGN(Value target, lookup(n.targets[0], frame));
    if (!target.is_namespace()) {
      return make_error("cannot set attribute '{}' on '{}': only namespace() objects can be assigned to", n.attr,
                        n.targets[0]);
    }
    target.mutable_dict().set(n.attr, std::move(v));
    return ok_status();
  }
  return unpack(n.targets, v, frame);
}

// Reserves the copy (and for a string, one value per character) before making it.
Result<std::vector<Value>> Interp::iterate(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return std::vector<Value>{};
    case Type::List: STRATA_TRY(reserve_list(v.items().size())); return v.items();
    case Type::String: {
      const std::string& s = v.str();
      STRATA_TRY(count_bytes(s.size()));
      const size_t n = utf8_length(s);
      STRATA_TRY(reserve_list(n));
      STRATA_TRY(reserve_strings(n, s.size()));
      std::vector<Value> chars;
      chars.reserve(n);
      for (size_t i = 0; i < s.size();) {
        const size_t len = utf8_char_len(s, i);
        chars.push_back(Value::string(s.substr(i, len)));
        i += len;
      }
      return chars;
    }
    case Type::Dict:
      if (!v.is_namespace()) {
        const auto& items = v.dict_obj().items;
        size_t bytes = 0;
        for (const auto& kv : items) bytes += kv.first.size();
        STRATA_TRY(reserve_list(items.size()));
        STRATA_TRY(reserve_strings(items.size(), bytes));
        std::vector<Value> keys;
        keys.reserve(items.size());
        for (const auto& [k, unused] : items) keys.push_back(Value::string(k));
        return keys;
      }
      [[fallthrough]];
    default: return make_error("'{}' object is not iterable", type_name(v));
  }
}

Result<Flow> Interp::exec_for(const Node& n, Frame& frame, std::string& out) {
  STRATA_ASSIGN(Value seq, eval(*n.expr, frame));
  // A list is walked in place (it is immutable); anything else is listed first.
  std::vector<Value> listed;
  const std::vector<Value>* items = &listed;
  if (seq.is_list() && !n.cond) {
    items = &seq.items();
  } else {
    auto r = iterate(seq);
    if (!r.ok()) return located(*n.expr, std::move(r).error());
    listed = std::move(r).value();
  }
  Frame f{&frame, {}};
  if (n.cond) {
    std::vector<Value> kept;
    for (auto& item : listed) {
      f.vars.clear();
      if (auto s = unpack(n.targets, item, f); !s.ok()) return located(n, std::move(s).error());
      STRATA_ASSIGN(Value keep, eval(*n.cond, f));
      if (truthy(keep)) kept.push_back(std::move(item));
    }
    listed = std::move(kept);
  }
  if (items->empty()) {
    f.vars.clear();
    return exec_body(n.else_body, f, out);
  }
  // One loop object per loop, updated in place each iteration (like Jinja's LoopContext).
  const auto len = static_cast<int64_t>(items->size());
  auto position = std::make_shared<int64_t>(0);
  std::vector<std::pair<std::string, Value>> fields = {
      {"index", {}},
      {"index0", {}},
      {"revindex", {}},
      {"revindex0", {}},
      {"first", {}},
      {"last", {}},
      {"length", Value::integer(len)},
      {"depth", Value::integer(1)},
      {"depth0", Value::integer(0)},
      {"previtem", {}},
      {"nextitem", {}},
      {"cycle", Value::callable("cycle",
                                [position](Interp&, Args& args) -> Result<Value> {
                                  if (args.pos.empty()) return make_error("loop.cycle() needs at least one argument");
                                  return args.pos[static_cast<size_t>(*position) % args.pos.size()];
                                })},
  };
  const Value loop = Value::dict(std::move(fields), /*keys_unique=*/true);
  DictObj& lo = loop.mutable_dict();
  lo.depth = std::max(lo.depth, seq.depth() + 1);
  static const Value no_previous = Value::undefined("'loop.previtem' is undefined (first iteration)");
  static const Value no_next = Value::undefined("'loop.nextitem' is undefined (last iteration)");
  for (int64_t i = 0; i < len; ++i) {
    STRATA_TRY(count_steps(1));
    *position = i;
    lo.items[0].second = Value::integer(i + 1);
    lo.items[1].second = Value::integer(i);
    lo.items[2].second = Value::integer(len - i);
    lo.items[3].second = Value::integer(len - i - 1);
    lo.items[4].second = Value::boolean(i == 0);
    lo.items[5].second = Value::boolean(i == len - 1);
    lo.items[9].second = i > 0 ? (*items)[static_cast<size_t>(i - 1)] : no_previous;
    lo.items[10].second = i + 1 < len ? (*items)[static_cast<size_t>(i + 1)] : no_next;
    f.vars.clear();
    if (auto s = unpack(n.targets, (*items)[static_cast<size_t>(i)], f); !s.ok()) {
      return located(n, std::move(s).error());
    }
    f.set("loop", loop);
    STRATA_ASSIGN(Flow flow, exec_body(n.body, f, out));
    if (flow == Flow::Break) break;
  }
  return Flow::Normal;
}

Result<Value> Interp::call_macro(const Node& macro, Args& args) {
  if (call_depth_ >= opt_.limits.max_call_depth) {
    return limit_error(fmt::format("macro '{}' called recursively deeper than {} levels (max_call_depth)", macro.text,
                                   opt_.limits.max_call_depth));
  }
  ++call_depth_;
  struct Guard {
    int& depth;
    ~Guard() { --depth; }
  } guard{call_depth_};
  Frame f{root_, {}};
  std::vector<bool> used_kw(args.kw.size(), false);
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const auto& [name, def] = macro.params[i];
    if (i < args.pos.size()) {
      f.set(name, args.pos[i]);
      continue;
    }
    bool found = false;
    for (size_t k = 0; k < args.kw.size(); ++k) {
      if (args.kw[k].first == name) {
        f.set(name, args.kw[k].second);
        used_kw[k] = found = true;
      }
    }
    if (found) continue;
    if (def) {
      STRATA_ASSIGN(Value v, eval(*def, f));
      f.set(name, std::move(v));
    } else {
      f.set(name, Value::undefined(fmt::format("'{}' is undefined (macro '{}' called without it)", name, macro.text)));
    }
  }
  std::vector<Value> varargs;
  for (size_t i = macro.params.size(); i < args.pos.size(); ++i) varargs.push_back(args.pos[i]);
  std::vector<std::pair<std::string, Value>> kwargs;
  for (size_t k = 0; k < args.kw.size(); ++k) {
    if (!used_kw[k]) kwargs.push_back(args.kw[k]);
  }
  STRATA_TRY(reserve_list(varargs.size()));
  f.set("varargs", Value::list(std::move(varargs)));
  STRATA_ASSIGN(Value kw, make_dict(std::move(kwargs)));
  f.set("kwargs", std::move(kw));
  std::string out;
  STRATA_ASSIGN(Flow flow, exec_body(macro.body, f, out));
  (void)flow;
  STRATA_TRY(reserve_bytes(kStringBytes));  // the text was charged as it was emitted
  return Value::string(std::move(out));
}

Result<Value> Interp::apply_filters(const std::vector<ExprPtr>& filters, Value input, Frame& frame) {
  for (const auto& f : filters) {
    Args args;
    STRATA_TRY(eval_args(*f, frame, args));
    auto r = apply_filter(f->name, input, args);
    if (!r.ok()) return located(*f, std::move(r).error());
    input = std::move(r).value();
  }
  return input;
}

// ---- expressions --------------------------------------------------------------------------------

Result<Value> Interp::lookup(std::string_view name, Frame& frame) {
  for (Frame* f = &frame; f; f = f->parent) {
    if (Value* v = f->find(name)) return *v;
  }
  Value g = find_global(name);
  if (!g.is_undefined()) return g;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

Result<Value> Interp::call(const Value& fn, Args& args) {
  if (fn.is_callable()) return fn.callable_obj().fn(*this, args);
  if (fn.is_undefined()) return undefined_error(fn, "called as a function");
  return make_error("'{}' object is not callable", type_name(fn));
}

Result<Value> Interp::apply_filter(std::string_view name, const Value& input, Args& args) {
  FilterFn f = find_filter(name);
  if (!f) return make_error("unknown filter '{}'", name);
  return f(*this, input, args);
}

Result<bool> Interp::apply_test(std::string_view name, const Value& value, Args& args) {
  TestFn t = find_test(name);
  if (!t) return make_error("unknown test '{}'", name);
  return t(*this, value, args);
}

Result<Value> Interp::get_attr(const Value& obj, std::string_view name) {
  switch (obj.type()) {
    case Type::Undefined: return undefined_error(obj, fmt::format("reading attribute '{}'", name));
    case Type::Dict: {
      STRATA_TRY(count_steps(static_cast<int64_t>(obj.dict_obj().items.size() / 16)));  // a linear scan
      if (!obj.is_namespace() && has_method(obj, name)) break;
      if (const Value* v = obj.dict_obj().find(name)) return *v;
      return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), name));
    }
    default: break;
  }
  if (has_method(obj, name)) {
    std::string method(name);
    return Value::callable(method,
                           [obj, method](Interp& in, Args& args) { return call_method(in, obj, method, args); });
  }
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), name));
}

Result<Value> Interp::get_item(const Value& obj, const Value& key) {
  switch (obj.type()) {
    case Type::Undefined: return undefined_error(obj, fmt::format("reading item {}", short_repr(key)));
    case Type::Dict:
      STRATA_TRY(count_steps(static_cast<int64_t>(obj.dict_obj().items.size() / 16)));
      if (key.is_string()) {
        if (const Value* v = obj.dict_obj().find(key.str())) return *v;
        if (has_method(obj, key.str())) return get_attr(obj, key.str());
      }
      return Value::undefined(fmt::format("'dict object' has no attribute {}", short_repr(key)));
    case Type::List:
    case Type::String:
      if (key.is_int() || key.is_bool()) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
          const auto n = static_cast<int64_t>(obj.items().size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
        } else {
          const std::string& s = obj.str();
          STRATA_TRY(count_bytes(s.size()));  // finding the character walks the string
          const auto n = static_cast<int64_t>(utf8_length(s));
          if (i < 0) i += n;
          if (i >= 0 && i < n) {
            size_t at = 0;
            for (int64_t k = 0; k < i; ++k) at += utf8_char_len(s, at);
            return make_string(s.substr(at, utf8_char_len(s, at)));
          }
        }
        return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), key.as_int()));
      }
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), short_repr(key)));
    default:
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), short_repr(key)));
  }
}

Result<Value> Interp::eval(const Expr& e, Frame& frame) {
  if (auto s = count_steps(1); !s.ok()) return located(e, std::move(s).error());
  if (auto s = enter(); !s.ok()) return located(e, std::move(s).error());
  auto r = eval_inner(e, frame);
  leave();
  if (!r.ok()) return located(e, std::move(r).error());
  return r;
}

Status Interp::eval_args(const Expr& e, Frame& frame, Args& args) {
  for (const auto& a : e.args) {
    STRATA_ASSIGN(Value v, eval(*a, frame));
    args.pos.push_back(std::move(v));
  }
  for (const auto& [name, a] : e.kwargs) {
    STRATA_ASSIGN(Value v, eval(*a, frame));
    args.kw.emplace_back(name, std::move(v));
  }
  return ok_status();
}

Result<Value> Interp::eval_inner(const Expr& e, Frame& frame) {
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name: return lookup(e.name, frame);
    case ExprKind::ListLit: {
      std::vector<Value> items;
      for (const auto& a : e.args) {
        STRATA_ASSIGN(Value v, eval(*a, frame));
        items.push_back(std::move(v));
      }
      STRATA_ASSIGN(Value list, make_list(std::move(items)));
      if (e.tuple) return Value::tuple(list.items());
      return list;
    }
    case ExprKind::DictLit: {
      std::vector<std::pair<std::string, Value>> items;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        STRATA_ASSIGN(Value k, eval(*e.args[i], frame));
        if (!k.is_string()) return make_error("dict keys must be strings here, got '{}'", type_name(k));
        STRATA_ASSIGN(Value v, eval(*e.args[i + 1], frame));
        items.emplace_back(k.str(), std::move(v));
      }
      return make_dict(std::move(items));
    }
    case ExprKind::Attr: {
      STRATA_ASSIGN(Value obj, eval(*e.target, frame));
      return get_attr(obj, e.name);
    }
    case ExprKind::Item: {
      STRATA_ASSIGN(Value obj, eval(*e.target, frame));
      STRATA_ASSIGN(Value key, eval(*e.args[0], frame));
      return get_item(obj, key);
    }
    case ExprKind::Slice: return eval_slice(e, frame);
    case ExprKind::Call: {
      STRATA_ASSIGN(Value fn, eval(*e.target, frame));
      Args args;
      STRATA_TRY(eval_args(e, frame, args));
      return call(fn, args);
    }
    case ExprKind::Filter: {
      STRATA_ASSIGN(Value input, eval(*e.target, frame));
      Args args;
      STRATA_TRY(eval_args(e, frame, args));
      return apply_filter(e.name, input, args);
    }
    case ExprKind::Test: {
      STRATA_ASSIGN(Value v, eval(*e.target, frame));
      Args args;
      STRATA_TRY(eval_args(e, frame, args));
      STRATA_ASSIGN(bool r, apply_test(e.name, v, args));
      return Value::boolean(r != e.negated);
    }
    case ExprKind::Not: {
      STRATA_ASSIGN(Value v, eval(*e.target, frame));
      return Value::boolean(!truthy(v));
    }
    case ExprKind::Neg:
    case ExprKind::Pos: {
      STRATA_ASSIGN(Value v, eval(*e.target, frame));
      if (!v.is_number()) return operand_error(e.kind == ExprKind::Neg ? "unary -" : "unary +", v, Value::none());
      if (e.kind == ExprKind::Pos) return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::number(-v.as_float());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) return make_error("integer overflow");
      return Value::integer(-v.as_int());
    }
    case ExprKind::And:
    case ExprKind::Or: {
      STRATA_ASSIGN(Value a, eval(*e.args[0], frame));
      if (truthy(a) == (e.kind == ExprKind::Or)) return a;
      return eval(*e.args[1], frame);
    }
    case ExprKind::Cond: {
      STRATA_ASSIGN(Value c, eval(*e.args[1], frame));
      if (truthy(c)) return eval(*e.args[0], frame);
      if (e.args[2]) return eval(*e.args[2], frame);
      return Value::undefined("the inline if had no else branch");
    }
    case ExprKind::Binary: {
      STRATA_ASSIGN(Value a, eval(*e.args[0], frame));
      STRATA_ASSIGN(Value b, eval(*e.args[1], frame));
      return eval_binary(e, a, b);
    }
    case ExprKind::Compare: {
      STRATA_ASSIGN(Value left, eval(*e.args[0], frame));
      for (size_t i = 0; i < e.cmp.size(); ++i) {
        STRATA_ASSIGN(Value right, eval(*e.args[i + 1], frame));
        bool r = false;
        const CmpOp op = e.cmp[i];
        if (op == CmpOp::Eq || op == CmpOp::Ne) {
          STRATA_ASSIGN(bool eq, equal(left, right));
          r = eq == (op == CmpOp::Eq);
        } else if (op == CmpOp::In || op == CmpOp::NotIn) {
          Args args;
          args.pos.push_back(right);
          STRATA_ASSIGN(bool in, apply_test("in", left, args));
          r = in == (op == CmpOp::In);
        } else {
          if (left.is_undefined() || right.is_undefined()) return operand_error("comparison", left, right);
          STRATA_ASSIGN(int c, order(left, right));
          r = op == CmpOp::Lt ? c < 0 : op == CmpOp::Le ? c <= 0 : op == CmpOp::Gt ? c > 0 : c >= 0;
        }
        if (!r) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
  }
  return Value();
}

Result<Value> Interp::eval_slice(const Expr& e, Frame& frame) {
  STRATA_ASSIGN(Value obj, eval(*e.target, frame));
  int64_t parts[3] = {0, 0, 1};
  bool given[3] = {false, false, false};
  for (int i = 0; i < 3; ++i) {
    if (!e.args[static_cast<size_t>(i)]) continue;
    STRATA_ASSIGN(Value v, eval(*e.args[static_cast<size_t>(i)], frame));
    if (v.is_none() || v.is_undefined()) continue;
    if (!v.is_int() && !v.is_bool()) return make_error("slice indices must be integers, got '{}'", type_name(v));
    parts[i] = v.as_int();
    given[i] = true;
  }
  const int64_t step = parts[2];
  if (step == 0) return make_error("slice step cannot be zero");
  if (obj.is_undefined()) return undefined_error(obj, "sliced");
  if (!obj.is_list() && !obj.is_string()) return make_error("'{}' object cannot be sliced", type_name(obj));
  // Strings are sliced by character; an ASCII string's characters are its bytes.
  const std::string& str = obj.str();
  std::vector<std::string_view> chars;
  int64_t n = 0;
  if (obj.is_list()) {
    n = static_cast<int64_t>(obj.items().size());
  } else {
    STRATA_TRY(count_bytes(str.size()));
    n = static_cast<int64_t>(utf8_length(str));
    if (static_cast<size_t>(n) != str.size()) {
      STRATA_TRY(reserve_bytes(static_cast<size_t>(n) * sizeof(std::string_view)));
      chars = utf8_chars(str);
    }
  }
  auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v += n;
    return v < lo ? lo : (v > hi ? hi : v);
  };
  int64_t start, stop;
  if (step > 0) {
    start = given[0] ? clamp(parts[0], 0, n) : 0;
    stop = given[1] ? clamp(parts[1], 0, n) : n;
  } else {
    start = given[0] ? clamp(parts[0], -1, n - 1) : n - 1;
    stop = given[1] ? clamp(parts[1], -1, n - 1) : -1;
  }
  // Elements selected: ceil(span / |step|), computed without overflow.
  const uint64_t span = step > 0 ? static_cast<uint64_t>(std::max<int64_t>(0, stop - start))
                                 : static_cast<uint64_t>(std::max<int64_t>(0, start - stop));
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  const auto count = static_cast<size_t>(span / stride + (span % stride != 0));
  if (obj.is_list()) {
    STRATA_TRY(reserve_list(count));
    std::vector<Value> items;
    items.reserve(count);
    for (size_t k = 0; k < count; ++k) {
      items.push_back(obj.items()[static_cast<size_t>(start + static_cast<int64_t>(k) * step)]);
    }
    return make_list(std::move(items), true);
  }
  STRATA_TRY(reserve_string(chars.empty() ? count : std::min(str.size(), count * 4)));
  std::string text;
  for (size_t k = 0; k < count; ++k) {
    const auto i = static_cast<size_t>(start + static_cast<int64_t>(k) * step);
    if (chars.empty()) {
      text += str[i];
    } else {
      text.append(chars[i]);
    }
  }
  return make_string(std::move(text), true);
}

Result<Value> Interp::eval_binary(const Expr& e, const Value& a, const Value& b) {
  static constexpr const char* kNames[] = {"+", "-", "*", "/", "//", "%", "**", "~"};
  const char* name = kNames[static_cast<int>(e.op)];
  if (e.op == BinOp::Concat) {
    std::string hold_a, hold_b;
    STRATA_ASSIGN(std::string_view x, text(a, hold_a));
    STRATA_ASSIGN(std::string_view y, text(b, hold_b));
    return concat(x, y);
  }
  if (e.op == BinOp::Add) {
    if (a.is_string() && b.is_string()) return concat(a.str(), b.str());
    if (a.is_list() && b.is_list()) {
      STRATA_TRY(reserve_list(checked_add(a.items().size(), b.items().size())));
      std::vector<Value> items;
      items.reserve(a.items().size() + b.items().size());
      items.insert(items.end(), a.items().begin(), a.items().end());
      items.insert(items.end(), b.items().begin(), b.items().end());
      return make_list(std::move(items), true);
    }
  }
  if (e.op == BinOp::Mul && (a.is_string() || a.is_list() || b.is_string() || b.is_list())) {
    const Value& seq = (a.is_string() || a.is_list()) ? a : b;
    const Value& count = (a.is_string() || a.is_list()) ? b : a;
    if (!count.is_int() && !count.is_bool()) return operand_error(name, a, b);
    return repeat(seq, count.as_int());
  }
  if (!a.is_number() || !b.is_number()) return operand_error(name, a, b);
  const bool as_float = a.is_float() || b.is_float() || e.op == BinOp::Div;
  if (as_float) {
    const double x = a.as_float(), y = b.as_float();
    switch (e.op) {
      case BinOp::Add: return Value::number(x + y);
      case BinOp::Sub: return Value::number(x - y);
      case BinOp::Mul: return Value::number(x * y);
      case BinOp::Div:
        if (y == 0) return make_error("division by zero");
        return Value::number(x / y);
      case BinOp::FloorDiv:
        if (y == 0) return make_error("division by zero");
        return Value::number(std::floor(x / y));
      case BinOp::Mod: {
        if (y == 0) return make_error("modulo by zero");
        double r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::number(r);
      }
      case BinOp::Pow: return Value::number(std::pow(x, y));
      default: break;
    }
    return operand_error(name, a, b);
  }
  const int64_t x = a.as_int(), y = b.as_int();
  int64_t r = 0;
  switch (e.op) {
    case BinOp::Add:
      if (__builtin_add_overflow(x, y, &r)) return make_error("integer overflow");
      return Value::integer(r);
    case BinOp::Sub:
      if (__builtin_sub_overflow(x, y, &r)) return make_error("integer overflow");
      return Value::integer(r);
    case BinOp::Mul:
      if (__builtin_mul_overflow(x, y, &r)) return make_error("integer overflow");
      return Value::integer(r);
    case BinOp::FloorDiv: {
      if (y == 0) return make_error("integer division by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return make_error("integer overflow");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::integer(q);
    }
    case BinOp::Mod: {
      if (y == 0) return make_error("integer modulo by zero");
      if (y == -1) return Value::integer(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::integer(m);
    }
    case BinOp::Pow: {
      if (y < 0) {
        if (x == 0) return make_error("zero cannot be raised to a negative power");
        return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
      int64_t result = 1, base = x, exp = y;
      while (exp > 0) {
        if (exp & 1) {
          if (__builtin_mul_overflow(result, base, &result)) return make_error("integer overflow");
        }
        exp >>= 1;
        if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return make_error("integer overflow");
      }
      return Value::integer(result);
    }
    default: break;
  }
  return operand_error(name, a, b);
}

}  // namespace strata::jinja
