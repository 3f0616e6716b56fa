// Hostile templates: every one ends with a clear error from a limit (nesting, recursion, steps,
// output/string size, list length, value depth), never a crash, a hang or a leak (run under ASan).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "text/chat_template.h"
#include "text/jinja.h"

namespace strata::text::jinja {
namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// The error message of parsing or rendering `source`, or "" (plus a test failure) if it succeeded.
std::string error_of(const std::string& source, const RenderOptions& options = {}) {
  auto t = Template::parse(source);
  if (!t.ok()) return t.error().message;
  auto out = t->render({}, options);
  if (!out.ok()) return out.error().message;
  ADD_FAILURE() << "rendered " << out->size() << " bytes without error";
  return "";
}

#define EXPECT_ERROR_MENTIONS(message, needle) \
  EXPECT_NE((message).find(needle), std::string::npos) << "error was: " << (message)

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
  ChatRenderOptions options;
  options.tools_json = deep;
  ChatMessage call;
  call.role = "assistant";
  call.tool_calls = {{"id", "f", repeat("{\"a\":", 10000) + "1" + repeat("}", 10000)}};
  auto out = ChatTemplate::chatml().render({call}, options);
  ASSERT_FALSE(out.ok());
  EXPECT_ERROR_MENTIONS(out.error().message, "nested deeper");
  // Without the tools, the over-deep arguments are passed on as a string and the render works.
  options.tools_json.clear();
  EXPECT_TRUE(ChatTemplate::chatml().render({call}, options).ok());
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

}  // namespace
}  // namespace strata::text::jinja
