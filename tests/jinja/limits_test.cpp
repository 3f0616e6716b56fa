// Hostile templates: every one ends with a clear error from a limit (nesting, recursion, steps,
// output/string size, list length, value depth), never a crash, a hang or a leak (run under ASan).
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <chrono>
#include <string>
#include <vector>

#include "jinja/jinja.h"
#include "jinja/limits_test_util.h"

namespace strata::jinja {
namespace {

using strata::testing::repeat;

// The error message of parsing or rendering `source`, or "" (plus a test failure) if it succeeded.
std::string error_of(const std::string& source, const RenderOptions& options = {}) {
  auto t = Template::parse(source);
  if (!t.ok()) return t.error().message;
  auto out = t->render({}, options);
  if (!out.ok()) return out.error().message;
  ADD_FAILURE() << "rendered " << out->size() << " bytes without error";
  return "";
}

TEST(JinjaLimits, DeeplyNestedExpressionsAreAParseError) {
  EXPECT_ERROR_MENTIONS(error_of("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ " + repeat("not ", 100000) + "x }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ " + repeat("-", 100000) + "1 }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ " + repeat("1 if x else ", 100000) + "2 }}"), "nesting too deep");
}

TEST(JinjaLimits, LongOperatorChainsAreAParseError) {
  // Chains are parsed by loops but nest the syntax tree; unbounded they would overflow the stack when
  // the tree is evaluated or freed.
  EXPECT_ERROR_MENTIONS(error_of("{{ 1" + repeat(" + 1", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ x" + repeat(".a", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ x" + repeat("[0]", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ x" + repeat("()", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ x" + repeat(" | string", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ x" + repeat(" and x", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ x" + repeat(" or x", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ x" + repeat(" ~ x", 100000) + " }}"), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of("{{ x" + repeat(" if x", 100000) + " }}"), "nesting too deep");
  // Chains of a realistic length are fine.
  auto t = Template::parse("{{ ('a'" + repeat(" + 'a'", 60) + ") | length }}");
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto out = t->render({});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, "61");
}

TEST(JinjaLimits, DeeplyNestedBlocksAreAParseError) {
  EXPECT_ERROR_MENTIONS(error_of(repeat("{% if true %}", 50000) + repeat("{% endif %}", 50000)), "nesting too deep");
  EXPECT_ERROR_MENTIONS(error_of(repeat("{% for x in y %}", 50000)), "nesting too deep");
}

TEST(JinjaLimits, NestingWithinTheLimitStillWorks) {
  auto t = Template::parse("{{ " + repeat("(", 100) + "1" + repeat(")", 100) + " }}" + repeat("{% if true %}", 100) +
                           "!" + repeat("{% endif %}", 100));
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto out = t->render({});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, "1!");
}

TEST(JinjaLimits, InfiniteMacroRecursionStops) {
  EXPECT_ERROR_MENTIONS(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "recursively deeper than 64");
  EXPECT_ERROR_MENTIONS(
      error_of("{% macro a(n) %}{{ b(n + 1) }}{% endmacro %}{% macro b(n) %}{{ a(n) }}{% endmacro %}{{ a(0) }}"),
      "recursively deeper");
  // Recursion through a filter argument and a default value.
  EXPECT_ERROR_MENTIONS(error_of("{% macro f(x=f()) %}{% endmacro %}{{ f() }}"), "recursively deeper");
}

TEST(JinjaLimits, HugeLoopsHitTheStepLimit) {
  EXPECT_ERROR_MENTIONS(error_of("{% for i in range(100000000000) %}{% endfor %}"),
                        "range() of 100000000000 elements exceeds");
  RenderOptions small;
  small.limits.max_steps = 100000;
  EXPECT_ERROR_MENTIONS(
      error_of("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}", small),
      "limit of 100000 evaluation steps");
  // With the default limits too, in reasonable time.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_ERROR_MENTIONS(
      error_of("{% for i in range(1000000) %}{% for j in range(1000000) %}{{ '' }}{% endfor %}{% endfor %}"),
      "evaluation steps");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

TEST(JinjaLimits, OutputAndStringSizeAreBounded) {
  RenderOptions small;
  small.limits.max_output = 1 << 20;
  EXPECT_ERROR_MENTIONS(error_of("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", small), "output limit");
  EXPECT_ERROR_MENTIONS(error_of("{{ 'x' * 1000000000000 }}"), "exceeds the size limit");
  EXPECT_ERROR_MENTIONS(
      error_of("{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
      "exceeds the size limit");
  EXPECT_ERROR_MENTIONS(
      error_of("{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"),
      "exceeds the size limit");
  EXPECT_ERROR_MENTIONS(error_of("{% set ns = namespace(s='xy') %}{% for i in range(64) %}"
                                 "{% set ns.s = ns.s | replace('', ns.s) %}{% endfor %}"),
                        "exceeds the size limit");
  EXPECT_ERROR_MENTIONS(error_of("{% set block %}{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}{% endset %}"),
                        "output limit");
}

TEST(JinjaLimits, ListLengthAndNestingAreBounded) {
  EXPECT_ERROR_MENTIONS(
      error_of("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"),
      "list too long");
  EXPECT_ERROR_MENTIONS(error_of("{{ [0] * 1000000000000 }}"), "list too long");
  EXPECT_ERROR_MENTIONS(
      error_of("{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"),
      "nested deeper than 128");
  EXPECT_ERROR_MENTIONS(
      error_of("{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = {'k': ns.x} %}{% endfor %}"),
      "nested deeper than 128");
}

TEST(JinjaLimits, NamespaceCyclesDoNotRecurseOrLeak) {
  auto t = Template::parse(
      "{% set ns = namespace() %}{% set ns.self = ns %}{% set ns.l = [ns, ns] %}"
      "{{ ns }} {{ ns.self.self.self is defined }} {{ ns.l }} {{ ns == ns.self }}");
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto out = t->render({});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, "<Namespace> True [<Namespace>, <Namespace>] True");
  EXPECT_ERROR_MENTIONS(error_of("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns | tojson }}"),
                        "not JSON serializable");
}

TEST(JinjaLimits, DeeplyNestedJsonInputsAreRejected) {
  const std::string deep = repeat("[", 10000) + repeat("]", 10000);
  auto v = parse_json(deep, 64);
  ASSERT_FALSE(v.ok());
  EXPECT_ERROR_MENTIONS(v.error().message, "nested deeper than 64");
}

TEST(JinjaLimits, ErrorsInsideDeepEvaluationPropagateWithTheirLocation) {
  const std::string message = error_of(
      "{% macro f(n) %}{% if n == 0 %}{{ raise_exception('bottom reached') }}{% else %}{{ f(n - 1) }}{% endif %}"
      "{% endmacro %}\n{{ f(30) }}");
  EXPECT_ERROR_MENTIONS(message, "line 1");
  EXPECT_ERROR_MENTIONS(message, "bottom reached");
}

TEST(JinjaLimits, GarbageSourcesNeverCrash) {
  // A spread of malformed inputs: each must give a parse error or render, never crash.
  const std::string inputs[] = {
      "{{",
      "{%",
      "{#",
      "}}",
      "%}",
      "{{}}",
      "{%%}",
      "{% %}",
      "{{ 'a }}",
      "{{ \"\\",
      "{% if %}",
      "{% for %}",
      "{% for x in %}{% endfor %}",
      "{% set %}",
      "{% set = 1 %}",
      "{% macro %}",
      "{% endfor %}",
      "{{ a.}}",
      "{{ a[ }}",
      "{{ a[1:2:3:4] }}",
      "{{ f(a=1, 2) }}",
      "{{ 1 is }}",
      "{{ x | }}",
      "{% raw %}",
      "{{ {1 } }}",
      "{{ 'a' 'b' 1 }}",
      "{% if x %}{% else %}{% else %}{% endif %}",
      "{% for x in y %}{% elif %}{% endfor %}",
      std::string("{{ \0 }}", 7),
      "\xff\xfe{{ '\xff' }}",
      "{{ '\\u12' }}",
      "{{ 99999999999999999999 }}",
  };
  for (const auto& input : inputs) {
    auto t = Template::parse(input);
    if (t.ok()) (void)t->render({});
  }
  SUCCEED();
}


// ---- CPU and memory budgets (issue 10, item 8) ---------------------------------------------------------

// Renders `source` with `vars`; the error message, or "" (plus a test failure) if it rendered.
std::string error_with(const std::string& source, const Vars& vars, const RenderOptions& options) {
  auto t = Template::parse(source);
  if (!t.ok()) return t.error().message;
  auto out = t->render(vars, options);
  if (!out.ok()) return out.error().message;
  ADD_FAILURE() << source << ": rendered " << out->size() << " bytes without error";
  return "";
}

std::string render_with(const std::string& source, const Vars& vars, const RenderOptions& options = {}) {
  auto t = Template::parse(source);
  if (!t.ok()) return "parse error: " + t.error().message;
  auto out = t->render(vars, options);
  if (!out.ok()) return "render error: " + out.error().message;
  return *out;
}

// What rendering `source` used (the render may fail).
RenderStats stats_of(const std::string& source, const Vars& vars, const RenderOptions& options = {}) {
  RenderStats stats;
  auto t = Template::parse(source);
  EXPECT_TRUE(t.ok()) << t.error().message;
  if (t.ok()) (void)t->render(vars, options, &stats);
  return stats;
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// 'a' * 1 MB searched for 'a' * 500 KB + 'b': a naive search compares ~500 KB at each of 500 K offsets.
Vars quadratic_search_vars() {
  return {{"h", Value::string(std::string(1000000, 'a'))}, {"n", Value::string(std::string(500000, 'a') + "b")}};
}

const char* const kSearches[] = {
    "{{ n in h }}",         "{{ h.count(n) }}",   "{{ h.find(n) }}",     "{{ h.rfind(n) }}",
    "{{ h.index(n) }}",     "{{ h.rindex(n) }}",  "{{ h.split(n) }}",    "{{ h.rsplit(n) }}",
    "{{ h.replace(n, 'x') }}", "{{ h | replace(n, 'x') }}",
};

TEST(JinjaBudget, item8_quadratic_substring_searches_hit_the_step_limit) {
  RenderOptions small;
  small.limits.max_steps = 10000;  // less than the bytes searched / 64
  for (const char* source : kSearches) {
    EXPECT_ERROR_MENTIONS(error_with(source, quadratic_search_vars(), small), "evaluation steps");
    const RenderStats stats = stats_of(source, quadratic_search_vars(), small);
    EXPECT_TRUE(stats.limit_exceeded) << source;
    EXPECT_GT(stats.steps, small.limits.max_steps) << source;
  }
  // Within the default limits each search is charged for the 1.5 MB it scans.
  for (const char* source : kSearches) {
    const RenderStats stats = stats_of(source, quadratic_search_vars());
    EXPECT_GE(stats.steps, 1500000 / 64) << source;
    EXPECT_LT(stats.steps, 200000) << source;
  }
}

TEST(JinjaBudget, item8_substring_searches_on_long_strings_are_linear) {
  const Vars vars = quadratic_search_vars();
  EXPECT_EQ(render_with("{{ n in h }} {{ h.count(n) }} {{ h.find(n) }} {{ h.rfind(n) }} {{ h.split(n) | length }} "
                        "{{ h.rsplit(n) | length }} {{ h.replace(n, 'x') | length }} {{ h.startswith(n) }}",
                        vars),
            "False 0 -1 -1 1 1 1000000 False");
  EXPECT_EQ(render_with("{{ h.count('aa') }} {{ h.rfind('aa') }} {{ h.find('a' * 1000) }} {{ h.rsplit('aa', 1)[0] | length }}", vars),
            "500000 999998 0 999998");
}

// Every list builtin does work proportional to the list (n log n for sorting); 200 000 elements at
// one step each are over a limit of 100 000 steps.
TEST(JinjaBudget, item8_list_builtins_are_charged_per_element) {
  std::vector<Value> items;
  for (int i = 0; i < 200000; ++i) items.push_back(Value::integer(i % 1000));
  const Vars vars = {{"l", Value::list(std::move(items))}};
  RenderOptions small;
  small.limits.max_steps = 100000;
  for (const char* source : {
           "{{ l | sort | length }}", "{{ l | reverse | length }}", "{{ l | unique | length }}",
           "{{ l | map('string') | length }}", "{{ l | join(',') | length }}", "{{ l | tojson | length }}",
           "{{ l | sum }}", "{{ l | min }}", "{{ l | max }}", "{{ l | list | length }}",
           "{{ l | select('odd') | length }}", "{{ l | string | length }}", "{{ l[1:] | length }}",
           "{{ (l + l) | length }}", "{{ -1 in l }}", "{{ l.count(5) }}", "{{ l == l[:] }}",
       }) {
    EXPECT_ERROR_MENTIONS(error_with(source, vars, small), "evaluation steps");
  }
  // n log2 n: sorting 100 000 elements needs more than 1.6 M steps.
  small.limits.max_steps = 1000000;
  EXPECT_ERROR_MENTIONS(error_with("{{ range(100000) | list | sort | length }}", {}, small), "evaluation steps");
  const RenderStats stats = stats_of("{{ l | sort | length }}", vars);
  EXPECT_FALSE(stats.limit_exceeded);
  EXPECT_GE(stats.steps, 200000 * 17);  // 17 = bit width of 200 000, about log2 n
}

TEST(JinjaBudget, item8_builders_refuse_before_allocating) {
  const long rss_before = peak_rss_kib();
  const Vars vars = {{"h", Value::string(std::string(4000000, 'a'))}, {"nl", Value::string(std::string(100000, '\n'))}};
  // Sizes are computed before anything is built, so the error can name the whole would-be size.
  EXPECT_ERROR_MENTIONS(error_with("{{ 'x' * 4294967296 }}", vars, {}), "would build a string of 4294967296 bytes");
  EXPECT_ERROR_MENTIONS(error_with("{{ [0] * 4294967296 }}", vars, {}), "would build a list of 4294967296 elements");
  EXPECT_ERROR_MENTIONS(error_with("{{ h.replace('a', 'a' * 1000) }}", vars, {}),
                        "would build a string of 4000000000 bytes");
  EXPECT_ERROR_MENTIONS(error_with("{{ h | replace('a', 'a' * 1000) }}", vars, {}),
                        "would build a string of 4000000000 bytes");
  EXPECT_ERROR_MENTIONS(error_with("{{ h.split('a') | length }}", vars, {}), "would build a list of 4000001 elements");
  EXPECT_ERROR_MENTIONS(error_with("{{ h | list | length }}", vars, {}), "would build a list of 4000000 elements");
  EXPECT_ERROR_MENTIONS(error_with("{{ (h ~ h ~ h ~ h ~ h) | length }}", vars, {}),
                        "would build a string of 20000000 bytes");
  EXPECT_ERROR_MENTIONS(error_with("{{ ([h] * 5) | join | length }}", vars, {}), "would build a string of 20000000 bytes");
  EXPECT_ERROR_MENTIONS(error_with("{{ nl | indent(h, false, true) | length }}", vars, {}), "would build a string of");
  // Nothing near the would-be sizes was allocated (a naive split or list alone would take >300 MB).
  EXPECT_LT(peak_rss_kib() - rss_before, 200 * 1024);
  for (const char* source : {"{{ 'x' * 4294967296 }}", "{{ h.split('a') | length }}", "{{ h | list | length }}",
                             "{{ h.replace('a', 'a' * 1000) }}"}) {
    const RenderStats stats = stats_of(source, vars);
    EXPECT_TRUE(stats.limit_exceeded) << source;
    EXPECT_LT(stats.memory, size_t{1} << 20) << source;  // refused before anything big was charged
  }
}

// Many allocations, each well within the size limits, add up to more than the memory budget.
TEST(JinjaBudget, item8_the_memory_budget_covers_every_allocation) {
  EXPECT_ERROR_MENTIONS(error_of("{% for i in range(200) %}{% set x = 'y' * 1000000 %}{% endfor %}done"),
                        "memory budget");
  std::vector<Value> items;
  for (int i = 0; i < 20000; ++i) items.push_back(Value::integer(i));
  const Vars vars = {{"h", Value::string(std::string(100000, 'a') + "\n")}, {"l", Value::list(std::move(items))}};
  for (const char* expr : {
           "h.upper()", "h | lower", "h.title()", "h | capitalize", "h.strip('b')", "h | trim", "h.replace('a', 'b')",
           "h[1:]", "h ~ 'b'", "h + 'b'", "h * 2", "h | reverse", "h | center(200000)", "h | indent", "h | escape",
           "[h] | join", "h.split('a')", "h | list", "h.splitlines()", "h | tojson", "[h] | string", "h.rstrip('\\n')",
           "l | sort", "range(20000) | list", "l | map('string')", "l | reverse", "l | list", "l | select",
           "l | join(',')", "l | tojson", "l[1:]", "l + l", "l * 2", "{h: 1}", "{h: 1} | items", "{h: 1}.keys()",
           "h.rsplit('a', 1000)", "h.lstrip('b')", "h.rfind('b')",
       }) {
    RenderOptions small;
    small.limits.max_memory = 2 << 20;
    const std::string source = std::string("{% for i in range(1000) %}{% set x = ") + expr + " %}{% endfor %}";
    auto t = Template::parse(source);
    ASSERT_TRUE(t.ok()) << t.error().message;
    RenderStats stats;
    auto out = t->render(vars, small, &stats);
    ASSERT_FALSE(out.ok()) << expr;
    EXPECT_ERROR_MENTIONS(out.error().message, "memory budget of 2097152 bytes");
    EXPECT_TRUE(stats.limit_exceeded);
    EXPECT_LE(stats.memory, small.limits.max_memory);
  }
}

}  // namespace
}  // namespace strata::jinja
