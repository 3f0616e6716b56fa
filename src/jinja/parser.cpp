// Recursive-descent parser for the Jinja subset, following Jinja2's grammar and operator precedence:
// conditional < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - + < postfix
// (. [] ()) < filters and tests (so `messages|length - 1` is `(messages|length) - 1`).
#include <fmt/format.h>

#include <initializer_list>
#include <string_view>

#include "jinja/jinja.h"
#include "jinja/ast.h"

namespace strata::jinja {

namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_nesting) : toks_(std::move(tokens)), max_nesting_(max_nesting) {}

  Result<std::shared_ptr<const Program>> run() {
    auto program = std::make_shared<Program>();
    STRATA_ASSIGN(program->body, parse_body({}));
    return std::shared_ptr<const Program>(std::move(program));
  }

 private:
  struct DepthGuard {
    int& depth;
    ~DepthGuard() { --depth; }
  };
  // Left-assoc chains (a + b + c, x.y.z, v | f | g) are built by loops, not recursion, but each link
  // nests the tree one level deeper; links count towards the nesting limit like recursion does.
  struct ChainGuard {
    int& depth;
    int links = 0;
    ~ChainGuard() { depth -= links; }
  };
  Status deepen(ChainGuard& chain) {
    ++chain.links;
    if (++depth_ > max_nesting_) {
      return error_here(fmt::format("template nesting too deep (more than {} levels)", max_nesting_));
    }
    return ok_status();
  }
#define JINJA_NEST_GUARD()                                                                           \
  ++depth_;                                                                                          \
  DepthGuard depth_guard_{depth_};                                                                   \
  if (depth_ > max_nesting_) {                                                                       \
    return error_here(fmt::format("template nesting too deep (more than {} levels)", max_nesting_)); \
  }

  const Token& peek(size_t ahead = 0) const {
    const size_t i = pos_ + ahead;
    return i < toks_.size() ? toks_[i] : toks_.back();
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Op && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Name && peek(ahead).text == name;
  }
  Error error_at(const Token& t, const std::string& message) const {
    return make_error("line {}, column {}: {}", t.line, t.col, message);
  }
  Error error_here(const std::string& message) const { return error_at(peek(), message); }
  Error unexpected(const std::string& expected) const {
    return error_here(fmt::format("expected {}, got {}", expected, describe_token(peek())));
  }
  Status expect_op(std::string_view op) {
    if (!at_op(op)) return unexpected(fmt::format("'{}'", op));
    next();
    return ok_status();
  }
  Status expect_block_end() {
    if (peek().kind != Tok::BlockEnd) return unexpected("'%}'");
    next();
    return ok_status();
  }
  Result<std::string> expect_name(const char* what) {
    if (peek().kind != Tok::Name) return unexpected(what);
    return next().text;
  }

  template <typename T>
  static std::unique_ptr<T> make(const Token& at) {
    auto n = std::make_unique<T>();
    n->line = at.line;
    n->col = at.col;
    return n;
  }
  static ExprPtr make_expr(ExprKind kind, const Token& at) {
    auto e = make<Expr>(at);
    e->kind = kind;
    return e;
  }

  // ---- template structure ----------------------------------------------------------------------

  // Parses nodes until the end of the template or a {% tag %} whose name is in `stops` (not consumed).
  Result<Body> parse_body(std::initializer_list<std::string_view> stops) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == Tok::Eof) return body;
      if (t.kind == Tok::Text) {
        auto n = make<Node>(t);
        n->kind = NodeKind::Text;
        n->text = next().text;
        body.push_back(std::move(n));
      } else if (t.kind == Tok::VarBegin) {
        auto n = make<Node>(next());
        n->kind = NodeKind::Output;
        STRATA_ASSIGN(n->expr, parse_expression());
        if (peek().kind != Tok::VarEnd) return unexpected("'}}'");
        next();
        body.push_back(std::move(n));
      } else if (t.kind == Tok::BlockBegin) {
        if (peek(1).kind != Tok::Name) {
          return error_at(peek(1),
                          fmt::format("expected a statement name after '{{%', got {}", describe_token(peek(1))));
        }
        for (std::string_view stop : stops) {
          if (peek(1).text == stop) return body;
        }
        STRATA_ASSIGN(auto node, parse_statement());
        body.push_back(std::move(node));
      } else {
        return error_at(t, fmt::format("unexpected {}", describe_token(t)));
      }
    }
  }

  // After a body: consumes {% end_name %} or reports the unclosed block opened at `opener`.
  Status close_block(const Token& opener, const std::string& block, std::string_view end_name) {
    if (peek().kind == Tok::Eof) {
      return error_at(opener,
                      fmt::format("'{}' block is never closed (expected '{{% {} %}}' before the end of the template)",
                                  block, end_name));
    }
    next();  // {%
    if (!at_name(end_name)) return unexpected(fmt::format("'{}'", end_name));
    next();
    return expect_block_end();
  }

  Result<std::unique_ptr<Node>> parse_statement() {
    JINJA_NEST_GUARD();
    const Token& begin = next();  // {%
    const Token& kw = next();
    const std::string name = kw.text;
    if (name == "if") return parse_if(begin);
    if (name == "for") return parse_for(begin);
    if (name == "set") return parse_set(begin);
    if (name == "macro") return parse_macro(begin);
    if (name == "filter") return parse_filter_block(begin);
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return error_at(kw, fmt::format("'{}' outside of a for loop", name));
      auto n = make<Node>(begin);
      n->kind = name == "break" ? NodeKind::Break : NodeKind::Continue;
      STRATA_TRY(expect_block_end());
      return n;
    }
    if (name == "generation") {
      auto n = make<Node>(begin);
      n->kind = NodeKind::Scope;
      STRATA_TRY(expect_block_end());
      STRATA_ASSIGN(n->body, parse_body({"endgeneration"}));
      STRATA_TRY(close_block(begin, "generation", "endgeneration"));
      return n;
    }
    if (name == "elif" || name == "else" || name == "endif" || name == "endfor" || name == "endset" ||
        name == "endmacro" || name == "endfilter" || name == "endgeneration" || name == "endraw") {
      return error_at(kw, fmt::format("unexpected '{}': no open block it belongs to", name));
    }
    if (name == "call" || name == "include" || name == "import" || name == "from" || name == "extends" ||
        name == "block" || name == "do" || name == "with" || name == "autoescape") {
      return error_at(kw, fmt::format("'{}' statements are not supported in chat templates", name));
    }
    return error_at(kw, fmt::format("unknown statement '{}'", name));
  }

  Result<std::unique_ptr<Node>> parse_if(const Token& begin) {
    auto n = make<Node>(begin);
    n->kind = NodeKind::If;
    STRATA_ASSIGN(auto cond, parse_expression());
    STRATA_TRY(expect_block_end());
    STRATA_ASSIGN(auto body, parse_body({"elif", "else", "endif"}));
    n->branches.emplace_back(std::move(cond), std::move(body));
    while (true) {
      if (peek().kind == Tok::Eof) return close_block(begin, "if", "endif").error();
      next();  // {%
      const std::string kw = next().text;
      if (kw == "elif") {
        STRATA_ASSIGN(auto c, parse_expression());
        STRATA_TRY(expect_block_end());
        STRATA_ASSIGN(auto b, parse_body({"elif", "else", "endif"}));
        n->branches.emplace_back(std::move(c), std::move(b));
      } else if (kw == "else") {
        STRATA_TRY(expect_block_end());
        STRATA_ASSIGN(n->else_body, parse_body({"endif"}));
        STRATA_TRY(close_block(begin, "if", "endif"));
        return n;
      } else {  // endif
        STRATA_TRY(expect_block_end());
        return n;
      }
    }
  }

  Result<std::vector<std::string>> parse_targets() {
    std::vector<std::string> targets;
    const bool paren = at_op("(");
    if (paren) next();
    while (true) {
      STRATA_ASSIGN(auto name, expect_name("a variable name"));
      targets.push_back(std::move(name));
      if (!at_op(",")) break;
      next();
      if (paren && at_op(")")) break;
    }
    if (paren) STRATA_TRY(expect_op(")"));
    return targets;
  }

  // expr or expr, expr, ... (a tuple, made a list).
  Result<ExprPtr> parse_tuple(bool with_condexpr) {
    const Token& at = peek();
    STRATA_ASSIGN(auto first, with_condexpr ? parse_expression() : parse_or());
    if (!at_op(",")) return first;
    auto list = make_expr(ExprKind::ListLit, at);
    list->tuple = true;
    list->args.push_back(std::move(first));
    while (at_op(",")) {
      next();
      if (peek().kind == Tok::BlockEnd || peek().kind == Tok::VarEnd || at_name("if")) break;
      STRATA_ASSIGN(auto item, with_condexpr ? parse_expression() : parse_or());
      list->args.push_back(std::move(item));
    }
    return list;
  }

  Result<std::unique_ptr<Node>> parse_for(const Token& begin) {
    auto n = make<Node>(begin);
    n->kind = NodeKind::For;
    STRATA_ASSIGN(n->targets, parse_targets());
    if (!at_name("in")) return unexpected("'in'");
    next();
    STRATA_ASSIGN(n->expr, parse_tuple(/*with_condexpr=*/false));
    if (at_name("if")) {
      next();
      STRATA_ASSIGN(n->cond, parse_expression());
    }
    if (at_name("recursive")) return error_here("recursive loops are not supported");
    STRATA_TRY(expect_block_end());
    ++loop_depth_;
    auto body = parse_body({"else", "endfor"});
    --loop_depth_;
    if (!body.ok()) return std::move(body).error();
    n->body = std::move(body).value();
    if (peek().kind != Tok::Eof && at_name("else", 1)) {
      next();
      next();
      STRATA_TRY(expect_block_end());
      STRATA_ASSIGN(n->else_body, parse_body({"endfor"}));
    }
    STRATA_TRY(close_block(begin, "for", "endfor"));
    return n;
  }

  Result<std::unique_ptr<Node>> parse_set(const Token& begin) {
    auto n = make<Node>(begin);
    n->kind = NodeKind::Set;
    STRATA_ASSIGN(auto first, expect_name("a variable name"));
    n->targets.push_back(std::move(first));
    if (at_op(".")) {
      next();
      STRATA_ASSIGN(n->attr, expect_name("an attribute name"));
    } else {
      while (at_op(",")) {
        next();
        STRATA_ASSIGN(auto more, expect_name("a variable name"));
        n->targets.push_back(std::move(more));
      }
    }
    if (at_op("=")) {
      next();
      STRATA_ASSIGN(n->expr, parse_tuple(/*with_condexpr=*/true));
      STRATA_TRY(expect_block_end());
      return n;
    }
    // Block set: {% set x %}...{% endset %} or {% set x | filter %}...{% endset %}
    if (!n->attr.empty() || n->targets.size() != 1) return unexpected("'='");
    n->kind = NodeKind::SetBlock;
    if (at_op("|")) {
      STRATA_ASSIGN(n->filters, parse_filter_chain());
    }
    STRATA_TRY(expect_block_end());
    STRATA_ASSIGN(n->body, parse_body({"endset"}));
    STRATA_TRY(close_block(begin, "set", "endset"));
    return n;
  }

  Result<std::unique_ptr<Node>> parse_macro(const Token& begin) {
    auto n = make<Node>(begin);
    n->kind = NodeKind::Macro;
    STRATA_ASSIGN(n->text, expect_name("a macro name"));
    STRATA_TRY(expect_op("("));
    while (!at_op(")")) {
      STRATA_ASSIGN(auto param, expect_name("a parameter name"));
      ExprPtr def;
      if (at_op("=")) {
        next();
        STRATA_ASSIGN(def, parse_expression());
      }
      n->params.emplace_back(std::move(param), std::move(def));
      if (!at_op(",")) break;
      next();
    }
    STRATA_TRY(expect_op(")"));
    STRATA_TRY(expect_block_end());
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    auto body = parse_body({"endmacro"});
    loop_depth_ = saved_loops;
    if (!body.ok()) return std::move(body).error();
    n->body = std::move(body).value();
    STRATA_TRY(close_block(begin, "macro", "endmacro"));
    return n;
  }

  // name(args) | name | ... as Filter expressions with no input (filled in at render time).
  Result<std::vector<ExprPtr>> parse_filter_chain() {
    std::vector<ExprPtr> filters;
    if (at_op("|")) next();
    while (true) {
      const Token& at = peek();
      STRATA_ASSIGN(auto name, expect_name("a filter name"));
      auto f = make_expr(ExprKind::Filter, at);
      f->name = std::move(name);
      if (at_op("(")) STRATA_TRY(parse_call_args(*f));
      filters.push_back(std::move(f));
      if (!at_op("|")) break;
      next();
    }
    return filters;
  }

  Result<std::unique_ptr<Node>> parse_filter_block(const Token& begin) {
    auto n = make<Node>(begin);
    n->kind = NodeKind::FilterBlock;
    STRATA_ASSIGN(n->filters, parse_filter_chain());
    STRATA_TRY(expect_block_end());
    STRATA_ASSIGN(n->body, parse_body({"endfilter"}));
    STRATA_TRY(close_block(begin, "filter", "endfilter"));
    return n;
  }

  // ---- expressions -----------------------------------------------------------------------------

  Result<ExprPtr> parse_expression() { return parse_condexpr(); }

  Result<ExprPtr> parse_condexpr() {
    STRATA_ASSIGN(auto expr, parse_or());
    ChainGuard chain{depth_};
    while (at_name("if")) {
      STRATA_TRY(deepen(chain));
      const Token& at = next();
      auto cond = make_expr(ExprKind::Cond, at);
      STRATA_ASSIGN(auto test, parse_or());
      ExprPtr otherwise;
      if (at_name("else")) {
        next();
        JINJA_NEST_GUARD();  // `a if b else c if d else ...` recurses here
        STRATA_ASSIGN(otherwise, parse_condexpr());
      }
      cond->args.push_back(std::move(expr));
      cond->args.push_back(std::move(test));
      cond->args.push_back(std::move(otherwise));
      expr = std::move(cond);
    }
    return expr;
  }

  // A left-associative chain `operand (keyword operand)*` of one keyword operator (or, and).
  Result<ExprPtr> parse_keyword_chain(std::string_view keyword, ExprKind kind, Result<ExprPtr> (Parser::*operand)()) {
    STRATA_ASSIGN(auto left, (this->*operand)());
    ChainGuard chain{depth_};
    while (at_name(keyword)) {
      STRATA_TRY(deepen(chain));
      auto e = make_expr(kind, next());
      STRATA_ASSIGN(auto right, (this->*operand)());
      e->args.push_back(std::move(left));
      e->args.push_back(std::move(right));
      left = std::move(e);
    }
    return left;
  }

  Result<ExprPtr> parse_or() { return parse_keyword_chain("or", ExprKind::Or, &Parser::parse_and); }
  Result<ExprPtr> parse_and() { return parse_keyword_chain("and", ExprKind::And, &Parser::parse_not); }

  Result<ExprPtr> parse_not() {
    if (at_name("not")) {
      JINJA_NEST_GUARD();
      auto e = make_expr(ExprKind::Not, next());
      STRATA_ASSIGN(e->target, parse_not());
      return e;
    }
    return parse_compare();
  }

  Result<ExprPtr> parse_compare() {
    const Token& at = peek();
    STRATA_ASSIGN(auto first, parse_math1());
    ExprPtr cmp;
    while (true) {
      CmpOp op;
      if (at_op("==")) {
        op = CmpOp::Eq;
      } else if (at_op("!=")) {
        op = CmpOp::Ne;
      } else if (at_op("<")) {
        op = CmpOp::Lt;
      } else if (at_op("<=")) {
        op = CmpOp::Le;
      } else if (at_op(">")) {
        op = CmpOp::Gt;
      } else if (at_op(">=")) {
        op = CmpOp::Ge;
      } else if (at_name("in")) {
        op = CmpOp::In;
      } else if (at_name("not") && at_name("in", 1)) {
        op = CmpOp::NotIn;
      } else {
        break;
      }
      next();
      if (op == CmpOp::NotIn) next();
      if (!cmp) {
        cmp = make_expr(ExprKind::Compare, at);
        cmp->args.push_back(std::move(first));
      }
      STRATA_ASSIGN(auto operand, parse_math1());
      cmp->cmp.push_back(op);
      cmp->args.push_back(std::move(operand));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  using Level = Result<ExprPtr> (Parser::*)();
  Result<ExprPtr> parse_binary(Level operand, std::initializer_list<std::pair<std::string_view, BinOp>> ops) {
    STRATA_ASSIGN(auto left, (this->*operand)());
    ChainGuard chain{depth_};
    while (true) {
      const std::pair<std::string_view, BinOp>* found = nullptr;
      for (const auto& op : ops) {
        if (at_op(op.first)) found = &op;
      }
      if (!found) return left;
      STRATA_TRY(deepen(chain));
      auto e = make_expr(ExprKind::Binary, next());
      e->op = found->second;
      STRATA_ASSIGN(auto right, (this->*operand)());
      e->args.push_back(std::move(left));
      e->args.push_back(std::move(right));
      left = std::move(e);
    }
  }
  Result<ExprPtr> parse_math1() { return parse_binary(&Parser::parse_concat, {{"+", BinOp::Add}, {"-", BinOp::Sub}}); }
  Result<ExprPtr> parse_concat() { return parse_binary(&Parser::parse_math2, {{"~", BinOp::Concat}}); }
  Result<ExprPtr> parse_math2() {
    return parse_binary(&Parser::parse_pow,
                        {{"*", BinOp::Mul}, {"/", BinOp::Div}, {"//", BinOp::FloorDiv}, {"%", BinOp::Mod}});
  }
  Result<ExprPtr> parse_pow() { return parse_binary(&Parser::parse_unary_filtered, {{"**", BinOp::Pow}}); }
  Result<ExprPtr> parse_unary_filtered() { return parse_unary(true); }

  Result<ExprPtr> parse_unary(bool with_filter) {
    JINJA_NEST_GUARD();
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      const ExprKind kind = at_op("-") ? ExprKind::Neg : ExprKind::Pos;
      node = make_expr(kind, next());
      STRATA_ASSIGN(node->target, parse_unary(false));
    } else {
      STRATA_ASSIGN(node, parse_primary());
    }
    STRATA_ASSIGN(node, parse_postfix(std::move(node)));
    if (with_filter) {
      STRATA_ASSIGN(node, parse_filter_expr(std::move(node)));
    }
    return node;
  }

  // A primary expression, by its first token. No nesting guard here: parse_unary above and the
  // expressions inside keep the limit.
  Result<ExprPtr> parse_primary() {
    const Token& t = peek();
    if (t.kind == Tok::Name) return parse_name_or_constant();
    if (t.kind == Tok::String) return parse_string_literal();
    if (t.kind == Tok::Int || t.kind == Tok::Float) return parse_number_literal();
    if (at_op("(")) return parse_parenthesized();
    if (at_op("[")) return parse_list_literal();
    if (at_op("{")) return parse_dict_literal();
    return unexpected("an expression");
  }

  // true/True, false/False and none/None are constants; any other name is a variable.
  Result<ExprPtr> parse_name_or_constant() {
    const Token& t = next();
    auto e = make_expr(ExprKind::Literal, t);
    if (t.text == "true" || t.text == "True") {
      e->literal = Value::boolean(true);
    } else if (t.text == "false" || t.text == "False") {
      e->literal = Value::boolean(false);
    } else if (t.text == "none" || t.text == "None") {
      e->literal = Value::none();
    } else {
      e->kind = ExprKind::Name;
      e->name = t.text;
    }
    return e;
  }

  Result<ExprPtr> parse_string_literal() {
    auto e = make_expr(ExprKind::Literal, peek());
    std::string s;
    while (peek().kind == Tok::String) s += next().text;  // adjacent literals concatenate
    e->literal = Value::string(std::move(s));
    return e;
  }

  Result<ExprPtr> parse_number_literal() {
    const Token& t = next();
    auto e = make_expr(ExprKind::Literal, t);
    e->literal = t.kind == Tok::Int ? Value::integer(t.ival) : Value::number(t.fval);
    return e;
  }

  // (expr), or a tuple: () or (a,) or (a, b, ...).
  Result<ExprPtr> parse_parenthesized() {
    const Token& open = next();
    if (at_op(")")) {
      next();
      auto empty = make_expr(ExprKind::ListLit, open);  // ()
      empty->tuple = true;
      return empty;
    }
    STRATA_ASSIGN(auto inner, parse_expression());
    if (at_op(",")) {  // a tuple
      auto list = make_expr(ExprKind::ListLit, open);
      list->tuple = true;
      list->args.push_back(std::move(inner));
      while (at_op(",")) {
        next();
        if (at_op(")")) break;
        STRATA_ASSIGN(auto item, parse_expression());
        list->args.push_back(std::move(item));
      }
      inner = std::move(list);
    }
    STRATA_TRY(expect_op(")"));
    return inner;
  }

  Result<ExprPtr> parse_list_literal() {
    auto list = make_expr(ExprKind::ListLit, next());  // [
    while (!at_op("]")) {
      STRATA_ASSIGN(auto item, parse_expression());
      list->args.push_back(std::move(item));
      if (!at_op(",")) break;
      next();
    }
    STRATA_TRY(expect_op("]"));
    return list;
  }

  // Keys and values alternate in args.
  Result<ExprPtr> parse_dict_literal() {
    auto dict = make_expr(ExprKind::DictLit, next());  // {
    while (!at_op("}")) {
      STRATA_ASSIGN(auto key, parse_expression());
      STRATA_TRY(expect_op(":"));
      STRATA_ASSIGN(auto value, parse_expression());
      dict->args.push_back(std::move(key));
      dict->args.push_back(std::move(value));
      if (!at_op(",")) break;
      next();
    }
    STRATA_TRY(expect_op("}"));
    return dict;
  }

  Result<ExprPtr> parse_postfix(ExprPtr node) {
    ChainGuard chain{depth_};
    while (true) {
      if (at_op(".") || at_op("[") || at_op("(")) STRATA_TRY(deepen(chain));
      if (at_op(".")) {
        const Token& at = next();
        if (peek().kind == Tok::Name) {
          auto e = make_expr(ExprKind::Attr, at);
          e->name = next().text;
          e->target = std::move(node);
          node = std::move(e);
        } else if (peek().kind == Tok::Int) {
          auto e = make_expr(ExprKind::Item, at);
          auto index = make_expr(ExprKind::Literal, peek());
          index->literal = Value::integer(next().ival);
          e->args.push_back(std::move(index));
          e->target = std::move(node);
          node = std::move(e);
        } else {
          return unexpected("an attribute name after '.'");
        }
      } else if (at_op("[")) {
        STRATA_ASSIGN(node, parse_subscript(std::move(node)));
      } else if (at_op("(")) {
        auto call = make_expr(ExprKind::Call, peek());
        call->target = std::move(node);
        STRATA_TRY(parse_call_args(*call));
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> parse_subscript(ExprPtr node) {
    const Token& at = next();  // [
    ExprPtr start;
    if (!at_op(":")) {
      STRATA_ASSIGN(start, parse_expression());
    }
    if (!at_op(":")) {
      STRATA_TRY(expect_op("]"));
      auto e = make_expr(ExprKind::Item, at);
      e->target = std::move(node);
      e->args.push_back(std::move(start));
      return e;
    }
    next();  // :
    ExprPtr stop, step;
    if (!at_op(":") && !at_op("]")) {
      STRATA_ASSIGN(stop, parse_expression());
    }
    if (at_op(":")) {
      next();
      if (!at_op("]")) {
        STRATA_ASSIGN(step, parse_expression());
      }
    }
    STRATA_TRY(expect_op("]"));
    auto e = make_expr(ExprKind::Slice, at);
    e->target = std::move(node);
    e->args.push_back(std::move(start));
    e->args.push_back(std::move(stop));
    e->args.push_back(std::move(step));
    return e;
  }

  Status parse_call_args(Expr& call) {
    STRATA_TRY(expect_op("("));
    while (!at_op(")")) {
      if (peek().kind == Tok::Name && at_op("=", 1)) {
        std::string key = next().text;
        next();  // =
        STRATA_ASSIGN(auto value, parse_expression());
        call.kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!call.kwargs.empty()) return error_here("positional argument follows keyword argument");
        STRATA_ASSIGN(auto value, parse_expression());
        call.args.push_back(std::move(value));
      }
      if (!at_op(",")) break;
      next();
    }
    return expect_op(")");
  }

  Result<std::string> parse_dotted_name(const char* what) {
    STRATA_ASSIGN(auto name, expect_name(what));
    while (at_op(".") && peek(1).kind == Tok::Name) {
      next();
      name += "." + next().text;
    }
    return name;
  }

  Result<ExprPtr> parse_filter_expr(ExprPtr node) {
    ChainGuard chain{depth_};
    while (true) {
      if (at_op("|") || at_name("is") || at_op("(")) STRATA_TRY(deepen(chain));
      if (at_op("|")) {
        const Token& at = next();
        auto f = make_expr(ExprKind::Filter, at);
        STRATA_ASSIGN(f->name, parse_dotted_name("a filter name"));
        if (at_op("(")) STRATA_TRY(parse_call_args(*f));
        f->target = std::move(node);
        node = std::move(f);
      } else if (at_name("is")) {
        const Token& at = next();
        auto t = make_expr(ExprKind::Test, at);
        if (at_name("not")) {
          next();
          t->negated = true;
        }
        STRATA_ASSIGN(t->name, parse_dotted_name("a test name"));
        const Token& p = peek();
        if (at_op("(")) {
          STRATA_TRY(parse_call_args(*t));
        } else if ((p.kind == Tok::Name || p.kind == Tok::String || p.kind == Tok::Int || p.kind == Tok::Float ||
                    at_op("[") || at_op("{")) &&
                   !(p.kind == Tok::Name && (p.text == "else" || p.text == "or" || p.text == "and" || p.text == "if" ||
                                             p.text == "in" || p.text == "not"))) {
          if (at_name("is")) return error_here("tests cannot be chained with another 'is'");
          STRATA_ASSIGN(auto arg, parse_primary());
          STRATA_ASSIGN(arg, parse_postfix(std::move(arg)));
          t->args.push_back(std::move(arg));
        }
        t->target = std::move(node);
        node = std::move(t);
      } else if (at_op("(")) {
        auto call = make_expr(ExprKind::Call, peek());
        call->target = std::move(node);
        STRATA_TRY(parse_call_args(*call));
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

#undef JINJA_NEST_GUARD

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_nesting_;
  int loop_depth_ = 0;
};

}  // namespace

Result<std::shared_ptr<const Program>> parse_program(std::string_view source, const SyntaxOptions& syntax,
                                                     int max_nesting) {
  STRATA_ASSIGN(auto tokens, lex(source, syntax));
  Parser parser(std::move(tokens), max_nesting);
  return parser.run();
}

}  // namespace strata::jinja
