// Template: parsing (plus Jinja's compile-time check that every filter and test exists) and rendering.
#include "jinja/interp.h"

namespace strata::jinja {

namespace {

Status check_names(const Expr& e) {
  if (e.kind == ExprKind::Filter && !find_filter(e.name)) {
    return make_error("line {}, column {}: unknown filter '{}'", e.line, e.col, e.name);
  }
  if (e.kind == ExprKind::Test && !find_test(e.name)) {
    return make_error("line {}, column {}: unknown test '{}'", e.line, e.col, e.name);
  }
  if (e.target) STRATA_TRY(check_names(*e.target));
  for (const auto& a : e.args) {
    if (a) STRATA_TRY(check_names(*a));
  }
  for (const auto& [k, a] : e.kwargs) STRATA_TRY(check_names(*a));
  return ok_status();
}

Status check_names(const Body& body) {
  for (const auto& n : body) {
    for (const Expr* e : {n->expr.get(), n->cond.get()}) {
      if (e) STRATA_TRY(check_names(*e));
    }
    for (const auto& f : n->filters) STRATA_TRY(check_names(*f));
    for (const auto& [k, def] : n->params) {
      if (def) STRATA_TRY(check_names(*def));
    }
    for (const auto& [cond, b] : n->branches) {
      STRATA_TRY(check_names(*cond));
      STRATA_TRY(check_names(b));
    }
    STRATA_TRY(check_names(n->body));
    STRATA_TRY(check_names(n->else_body));
  }
  return ok_status();
}

}  // namespace

Result<Template> Template::parse(std::string_view source, const SyntaxOptions& syntax, int max_nesting) {
  STRATA_ASSIGN(auto program, parse_program(source, syntax, max_nesting));
  // Jinja rejects unknown filters and tests when it compiles a template; so do we.
  STRATA_TRY(check_names(program->body));
  Template t;
  t.program_ = std::move(program);
  return t;
}

Result<std::string> Template::render(const Vars& vars, const RenderOptions& options, RenderStats* stats) const {
  if (!program_) return make_error("template is empty (never parsed)");
  Interp interp(options);
  auto out = interp.render(*program_, vars);
  if (stats) *stats = interp.stats();
  return out;
}

}  // namespace strata::jinja
