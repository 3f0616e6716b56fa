// Syntax tree of a parsed Jinja template (built by jinja_parser.cpp, run by jinja_eval.cpp).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace strata::jinja {

enum class ExprKind : uint8_t {
  Literal,  // literal
  Name,     // name
  ListLit,  // args: items
  DictLit,  // args: key, value, key, value, ...
  Attr,     // target.name
  Item,     // target[args[0]]
  Slice,    // target[args[0]:args[1]:args[2]] (each may be null)
  Call,     // target(args, kwargs)
  Filter,   // target | name(args, kwargs); target null inside {% filter %} / {% set x | f %}
  Test,     // target is [not] name(args)
  Neg,      // -target
  Pos,      // +target
  Not,      // not target
  Binary,   // args[0] op args[1]
  Compare,  // args[0] cmp[0] args[1] cmp[1] args[2] ... (chained)
  And,      // args[0] and args[1]
  Or,       // args[0] or args[1]
  Cond,     // args[0] if args[1] else args[2] (else may be null)
};

enum class BinOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Concat };
enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 0;
  int col = 0;
  Value literal;
  std::string name;
  BinOp op = BinOp::Add;
  bool negated = false;  // Test: `is not`
  bool tuple = false;    // ListLit written as a tuple: (a, b) or a, b
  std::vector<CmpOp> cmp;
  ExprPtr target;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

enum class NodeKind : uint8_t {
  Text,         // text
  Output,       // {{ expr }}
  If,           // branches (condition, body) ..., else_body
  For,          // for targets in expr [if cond]: body, else_body
  Set,          // set targets = expr; or set targets[0].attr = expr when attr is non-empty
  SetBlock,     // set targets[0] [| filters] %} body {% endset
  Macro,        // macro name(params) body
  FilterBlock,  // filter filters %} body {% endfilter
  Break,
  Continue,
  Scope,  // a plain body ({% generation %})
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  NodeKind kind = NodeKind::Text;
  int line = 0;
  int col = 0;
  std::string text;  // Text: the text; Macro: the name
  std::string attr;  // Set: attribute assigned on a namespace
  ExprPtr expr;      // Output, For (iterable), Set (value)
  ExprPtr cond;      // For: loop filter
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro: name, default (may be null)
  std::vector<ExprPtr> filters;                         // SetBlock, FilterBlock
  Body body;
  Body else_body;
};

struct Program {
  Body body;
};

}  // namespace strata::jinja
