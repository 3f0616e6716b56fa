// The Jinja interpreter construct by construct: expected outputs are what Jinja2 (with transformers'
// chat-template settings: trim_blocks, lstrip_blocks, json.dumps tojson) prints for the same template.
#include "jinja/jinja.h"

#include <gtest/gtest.h>

#include <string>

namespace strata::jinja {
namespace {

Vars vars_from_json(const std::string& json) {
  Vars vars;
  auto v = parse_json(json, 64);
  EXPECT_TRUE(v.ok() && v->is_mapping()) << json;
  if (!v.ok() || !v->is_mapping()) return vars;
  for (const auto& kv : v->dict_obj().items) vars.push_back(kv);
  return vars;
}

// The rendered text, or "ERROR: <message>" (parse or render error).
std::string render(std::string_view source, const std::string& json_vars = "{}", const RenderOptions& options = {}) {
  auto t = Template::parse(source);
  if (!t.ok()) return "ERROR: " + t.error().message;
  auto out = t->render(vars_from_json(json_vars), options);
  if (!out.ok()) return "ERROR: " + out.error().message;
  return out.value();
}

::testing::AssertionResult fails_with(std::string_view source, const std::string& needle,
                                      const std::string& json_vars = "{}", const RenderOptions& options = {}) {
  const std::string out = render(source, json_vars, options);
  if (out.rfind("ERROR: ", 0) != 0) return ::testing::AssertionFailure() << "rendered without error: " << out;
  if (out.find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "error does not mention '" << needle << "': " << out;
  }
  return ::testing::AssertionSuccess();
}

// ---- text, output, comments, whitespace -------------------------------------------------------------

TEST(JinjaText, PlainTextAndCommentsAndOutput) {
  EXPECT_EQ(render("Hello, world!"), "Hello, world!");
  EXPECT_EQ(render("a{# a comment {{ x }} #}b"), "ab");
  EXPECT_EQ(render("{{ name }}!", R"({"name": "Ada"})"), "Ada!");
  EXPECT_EQ(render("{{ 'x' }}{{ \"y\" }}"), "xy");
  EXPECT_EQ(render(""), "");
}

TEST(JinjaText, PrintsValuesLikePythonStr) {
  EXPECT_EQ(render("{{ 42 }} {{ -7 }} {{ 1.0 }} {{ 2.5 }} {{ 1e20 }} {{ 0.0001 }} {{ 1e-05 }}"),
            "42 -7 1.0 2.5 1e+20 0.0001 1e-05");
  EXPECT_EQ(render("{{ true }} {{ False }} {{ none }} {{ None }}"), "True False None None");
  EXPECT_EQ(render("{{ [1, 'a', none, true, [\"it's\"]] }}"), "[1, 'a', None, True, [\"it's\"]]");
  EXPECT_EQ(render("{{ {'k': 'v', 'n': 1} }}"), "{'k': 'v', 'n': 1}");
  EXPECT_EQ(render("[{{ missing }}]"), "[]");
}

TEST(JinjaWhitespace, DashStripsWhitespaceOnThatSide) {
  EXPECT_EQ(render("a  \n  {{- 'b' -}}  \n  c"), "abc");
  EXPECT_EQ(render("a  {{- 'b' }}  c"), "ab  c");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a \n {#- note -#} \n b"), "ab");
}

TEST(JinjaWhitespace, TrimBlocksDropsTheNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nend"), "yes\nend");
  EXPECT_EQ(render("{# c #}\nx"), "x");
  // Only one newline, and not after {{ }}.
  EXPECT_EQ(render("{% if true %}\n\nyes{% endif %}"), "\nyes");
  EXPECT_EQ(render("{{ 'v' }}\nx"), "v\nx");
  // '+' keeps it.
  EXPECT_EQ(render("{% if true +%}\nyes{% endif %}"), "\nyes");
}

TEST(JinjaWhitespace, LstripBlocksRemovesIndentationBeforeABlockTag) {
  EXPECT_EQ(render("<ul>\n  {% for x in [1, 2] %}\n  <li>{{ x }}</li>\n  {% endfor %}\n</ul>"),
            "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>");
  // Not when something other than spaces precedes the tag on its line, and never before {{ }}.
  EXPECT_EQ(render("x  {% if true %}y{% endif %}"), "x  y");
  EXPECT_EQ(render("  {{ 'v' }}"), "  v");
  // '{%+' keeps the indentation.
  EXPECT_EQ(render("  {%+ if true %}y{% endif %}"), "  y");
}

TEST(JinjaWhitespace, NewlinesAreNormalisedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(render("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(render("a\n\n"), "a\n");
}

TEST(JinjaWhitespace, RawBlocksAreNotInterpreted) {
  EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}!"), "{{ x }}{% if %}!");
  EXPECT_EQ(render("a {%- raw -%} {{ b }} {%- endraw -%} c"), "a{{ b }}c");
}

// ---- statements -------------------------------------------------------------------------------------

TEST(JinjaIf, IfElifElse) {
  const char* t = "{% if n > 2 %}big{% elif n == 2 %}two{% else %}small{% endif %}";
  EXPECT_EQ(render(t, R"({"n": 3})"), "big");
  EXPECT_EQ(render(t, R"({"n": 2})"), "two");
  EXPECT_EQ(render(t, R"({"n": 1})"), "small");
  EXPECT_EQ(render("{% if x %}x{% endif %}{% if not x %}not{% endif %}"), "not");
}

TEST(JinjaFor, LoopVariables) {
  EXPECT_EQ(render("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.length }}{{ loop.first }}{{ loop.last }} {% endfor %}"),
            "10323TrueFalse 21213FalseFalse 32103FalseTrue ");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem is defined and loop.previtem }}-"
                   "{{ loop.nextitem | default('end') }};{% endfor %}"),
            "False-2;1-3;2-end;");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.cycle('odd', 'even') }} {% endfor %}"), "odd even odd ");
}

TEST(JinjaFor, ElseBranchRunsForAnEmptySequence) {
  EXPECT_EQ(render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in missing %}{{ x }}{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(render("{% for x in [1] %}{{ x }}{% else %}empty{% endfor %}"), "1");
}

TEST(JinjaFor, TupleUnpackingItemsDictsAndStrings) {
  EXPECT_EQ(render("{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"),
            "b=1;a=2;");
  EXPECT_EQ(render("{% for (a, b) in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}"), "3 7 ");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"x": 1, "y": 2}})"), "xy");
  EXPECT_EQ(render("{% for c in 'héllo' %}[{{ c }}]{% endfor %}"), "[h][é][l][l][o]");
  EXPECT_TRUE(fails_with("{% for a, b in [[1, 2, 3]] %}{% endfor %}", "cannot unpack 3 values into 2"));
  EXPECT_TRUE(fails_with("{% for x in none %}{% endfor %}", "not iterable"));
}

TEST(JinjaFor, LoopFilterBreakAndContinue) {
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}{{ '' if loop.last else ',' }}{% endfor %}"),
            "1,3,5,7,9");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "0123");
  EXPECT_EQ(render("{% for x in range(5) %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %}"), "13");
  EXPECT_TRUE(fails_with("{% break %}", "outside of a for loop"));
}

TEST(JinjaFor, AssignmentsInsideALoopDoNotLeakButNamespacesDo) {
  EXPECT_EQ(render("{% set x = 'outer' %}{% for i in [1, 2] %}{% set x = i %}{{ x }}{% endfor %}{{ x }}"), "12outer");
  EXPECT_EQ(render("{% set ns = namespace(total=0, found=false) %}{% for i in [1, 2, 3] %}"
                   "{% set ns.total = ns.total + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}"
                   "{{ ns.total }} {{ ns.found }}"),
            "6 True");
  EXPECT_EQ(
      render("{% for o in [[1, 2], [3]] %}{% for i in o %}{{ loop.index }}{% endfor %}|{{ loop.index }} {% endfor %}"),
      "12|1 1|2 ");
}

TEST(JinjaSet, PlainTupleAttributeAndBlockAssignments) {
  EXPECT_EQ(render("{% set a = 1 + 2 %}{{ a }}"), "3");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set a, b = ['x', 'y'] %}{{ a }}{{ b }}"), "xy");
  EXPECT_EQ(render("{% if true %}{% set a = 'set in if' %}{% endif %}{{ a }}"), "set in if");
  EXPECT_EQ(render("{% set ns = namespace(v='a') %}{% set ns.v = ns.v ~ 'b' %}{{ ns.v }}"), "ab");
  EXPECT_EQ(render("{% set block %}  Hello {{ 'there' }}  {% endset %}[{{ block }}]"), "[  Hello there  ]");
  EXPECT_EQ(render("{% set block | trim | upper %}  hi  {% endset %}[{{ block }}]"), "[HI]");
  EXPECT_TRUE(fails_with("{% set d = {} %}{% set d.x = 1 %}", "only namespace() objects"));
}

TEST(JinjaMacro, DefaultsKeywordsAndUseAsAnExpression) {
  const char* defs =
      "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}";
  EXPECT_EQ(render(std::string(defs) + "{{ greet('Ada') }}"), "Hello, Ada!");
  EXPECT_EQ(render(std::string(defs) + "{{ greet('Bob', punct='?') }}"), "Hello, Bob?");
  EXPECT_EQ(render(std::string(defs) + "{{ greet('Cy', 'Hi') | upper }}"), "HI, CY!");
  EXPECT_EQ(render(std::string(defs) + "{% set s = greet(name='Di') %}{{ s | length }}"), "10");
  // A missing argument without default is undefined; macros see top-level variables.
  EXPECT_EQ(render("{% macro m(a, b) %}[{{ a }}|{{ b }}|{{ top }}]{% endmacro %}{% set top = 'T' %}{{ m(1) }}"),
            "[1||T]");
  // Macros can call other macros and themselves (bounded recursion).
  EXPECT_EQ(
      render("{% macro count(n) %}{{ n }}{% if n > 0 %}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}"),
      "3210");
}

TEST(JinjaFilterBlock, AppliesFiltersToTheBody) {
  EXPECT_EQ(render("{% filter upper %}abc {{ 'd' }}{% endfilter %}"), "ABC D");
  EXPECT_EQ(render("{% filter replace('a', 'o') | upper %}banana{% endfilter %}"), "BONONO");
}

TEST(JinjaGeneration, GenerationBlocksRenderTheirBody) {
  EXPECT_EQ(render("{% generation %}answer{% endgeneration %}"), "answer");
}

// ---- expressions ------------------------------------------------------------------------------------

TEST(JinjaExpr, StringLiteralsAndEscapes) {
  EXPECT_EQ(render(R"({{ 'a\nb\t\'c\' \"d\" \\ \x41\u00e9 \d' }})"), "a\nb\t'c' \"d\" \\ Aé \\d");
  EXPECT_EQ(render(R"({{ "it's" 'adjacent' }})"), "it'sadjacent");
}

TEST(JinjaExpr, Arithmetic) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }}"),
            "7 9 3 -4 1 2");
  EXPECT_EQ(render("{{ 7 / 2 }} {{ 6 / 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1.5 + 1 }} {{ 10 - 0.5 }}"),
            "3.5 2.0 1024 0.5 2.5 9.5");
  EXPECT_EQ(render("{{ -x }} {{ +x }} {{ true + 1 }} {{ 1_000 }}", R"({"x": 4})"), "-4 4 2 1000");
  EXPECT_TRUE(fails_with("{{ 1 / 0 }}", "division by zero"));
  EXPECT_TRUE(fails_with("{{ 1 // 0 }}", "division by zero"));
  EXPECT_TRUE(fails_with("{{ 9223372036854775807 + 1 }}", "integer overflow"));
  EXPECT_TRUE(fails_with("{{ 'a' - 1 }}", "unsupported operand types for -: 'str' and 'int'"));
}

TEST(JinjaExpr, StringAndListConcatenation) {
  EXPECT_EQ(render("{{ 'a' + 'b' }} {{ 'n' ~ 1 ~ none ~ missing }} {{ [1] + [2, 3] }} {{ 'ab' * 3 }} {{ [0] * 2 }}"),
            "ab n1None [1, 2, 3] ababab [0, 0]");
  EXPECT_TRUE(fails_with("{{ 'a' + 1 }}", "'str' and 'int'"));
  EXPECT_TRUE(fails_with("{{ 'a' + missing }}", "'missing' is undefined"));
}

TEST(JinjaExpr, ComparisonsAndLogic) {
  EXPECT_EQ(
      render(
          "{{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'abc' < 'abd' }} {{ [1, 2] < [1, 3] }}"),
      "True True True False True True");
  EXPECT_EQ(render("{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }}|{{ not [] }} {{ not 1 }} {{ none == none }}"),
            "x b |True False True");
  EXPECT_EQ(render("{{ missing == missing }} {{ missing == none }}"), "True False");
  EXPECT_TRUE(fails_with("{{ 1 < 'a' }}", "cannot order"));
}

TEST(JinjaExpr, MembershipInStringsListsAndDicts) {
  EXPECT_EQ(render("{{ 'ell' in 'hello' }} {{ 'z' not in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'v' in "
                   "{'k': 'v'} }}"),
            "True True True True False");
  EXPECT_EQ(render("{{ '</think>' in content }}", R"({"content": "a</think>b"})"), "True");
  EXPECT_TRUE(fails_with("{{ 1 in 'abc' }}", "requires a string"));
}

TEST(JinjaExpr, ConditionalExpressions) {
  EXPECT_EQ(render("{{ 'yes' if x else 'no' }}|{{ 'shown' if x }}|{{ 'hidden' if not x }}", R"({"x": 1})"),
            "yes|shown|");
  EXPECT_EQ(render("{{ 'a' if false else 'b' if false else 'c' }}"), "c");
}

TEST(JinjaExpr, SubscriptsSlicesAndAttributes) {
  const std::string v = R"({"l": [10, 20, 30, 40], "d": {"role": "user", "n": {"x": 5}}, "s": "héllo"})";
  EXPECT_EQ(
      render("{{ l[0] }} {{ l[-1] }} {{ l.1 }} [{{ l[9] }}] {{ d['role'] }} {{ d.role }} {{ d.n.x }} [{{ d.nope }}]",
             v),
      "10 40 20 [] user user 5 []");
  EXPECT_EQ(render("{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[1:-1] }} {{ l[3:1:-1] }}", v),
            "[20, 30, 40] [10, 20] [40, 30, 20, 10] [10, 30] [30, 40] [20, 30] [40, 30]");
  EXPECT_EQ(render("{{ s[1] }} {{ s[::-1] }} {{ s[1:3] }} {{ s[-1] }}", v), "é olléh él o");
  EXPECT_TRUE(fails_with("{{ l[::0] }}", "slice step cannot be zero", v));
}

TEST(JinjaExpr, ListAndDictLiteralsAndTuples) {
  EXPECT_EQ(render("{{ [1, [2, 3], ] | length }} {{ {'a': 1, 'b': [2]}.b[0] }} {{ (1, 2)[1] }} {{ () | length }}"),
            "2 2 2 0");
  EXPECT_EQ(render("{{ {'a': 1, 'a': 2}.a }}"), "2");
  EXPECT_EQ(render("{{ (1, 'a') }} {{ (1,) }} {{ () }} {% set t = 1, 2 %}{{ t }}"), "(1, 'a') (1,) () (1, 2)");
}

TEST(JinjaUndefined, BehavesLikeJinjasDefaultUndefined) {
  EXPECT_EQ(
      render("[{{ x }}] {{ x is defined }} {{ x is undefined }} {{ x | length }} {{ x | default('d') }} {{ not x }}"),
      "[] False True 0 d True");
  EXPECT_EQ(render("{{ d.missing is defined }} {{ d.missing | default('fallback') }}", R"({"d": {}})"),
            "False fallback");
  EXPECT_EQ(render("{{ n | default('dflt', true) }} {{ n | default('dflt') }}", R"({"n": ""})"), "dflt ");
  EXPECT_TRUE(fails_with("{{ x.attr }}", "'x' is undefined"));
  EXPECT_TRUE(fails_with("{{ d.a.b }}", "'dict object' has no attribute 'a'", R"({"d": {}})"));
  EXPECT_TRUE(fails_with("{{ x() }}", "'x' is undefined"));
  EXPECT_TRUE(fails_with("{{ x | tojson }}", "not JSON serializable"));
}

// ---- filters ----------------------------------------------------------------------------------------

TEST(JinjaFilters, StringFilters) {
  EXPECT_EQ(render("[{{ '  a b \n' | trim }}] [{{ 'xxaxx' | trim('x') }}] {{ 'Ab' | upper }} {{ 'Ab' | lower }}"),
            "[a b] [a] AB ab");
  EXPECT_EQ(render("{{ 'hello WORLD' | capitalize }} {{ 'hello big-world' | title }} {{ 'aXa' | replace('a', 'b') }}"),
            "Hello world Hello Big-World bXb");
  EXPECT_EQ(render("{{ 'aaa' | replace('a', 'b', 2) }} {{ 5 | string }}{{ 5 | string | length }} {{ '<b>' | safe }} {{ "
                   "'<&>' | e }}"),
            "bba 51 <b> &lt;&amp;&gt;");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'x' | center(5) }}|"),
            "a\n  b\n\n  c|  a\n  b|  x  |");
  EXPECT_EQ(render("{{ 'one two  three' | wordcount }}"), "3");
}

TEST(JinjaFilters, SequenceFilters) {
  EXPECT_EQ(render("{{ [3, 1, 2] | length }} {{ 'héllo' | length }} {{ {'a': 1} | count }} {{ [3, 1, 2] | first }} {{ "
                   "[3, 1, 2] | last }}"),
            "3 5 1 3 2");
  EXPECT_EQ(
      render("{{ [1, 2, 3] | join(', ') }} {{ ['a', 'b'] | join }} {{ 'abc' | list }} {{ [1, 2] | reverse | list }}"),
      "1, 2, 3 ab ['a', 'b', 'c'] [2, 1]");
  EXPECT_EQ(render("{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [1, 2, "
                   "1, 3] | unique | list }}"),
            "[1, 2, 3] ['A', 'b', 'c'] [3, 2, 1] [1, 2, 3]");
  EXPECT_EQ(
      render("{{ [1, 5, 3] | min }} {{ [1, 5, 3] | max }} {{ [1, 2, 3] | sum }} {{ {'b': 1, 'a': 2} | dictsort }}"),
      "1 5 6 [('a', 2), ('b', 1)]");
}

TEST(JinjaFilters, MapSelectAndAttributeFilters) {
  const std::string v = R"({"ms": [{"role": "system", "n": 1}, {"role": "user", "n": 2}, {"role": "user", "n": 3}]})";
  EXPECT_EQ(render("{{ ms | map(attribute='role') | join(',') }}", v), "system,user,user");
  EXPECT_EQ(render("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='n') | list }}", v), "[2, 3]");
  EXPECT_EQ(render("{{ ms | rejectattr('role', '==', 'user') | list | length }}", v), "1");
  EXPECT_EQ(render("{{ ms | sort(attribute='n', reverse=true) | map(attribute='n') | join }}", v), "321");
  EXPECT_EQ(render("{{ ['a', 'B'] | map('upper') | join }} {{ [1, 2, 3, 4] | select('even') | list }} {{ [0, 1, ''] | "
                   "select | list }}"),
            "AB [2, 4] [1]");
  EXPECT_EQ(render("{{ [1, 2, 3] | reject('in', [2]) | list }} {{ ms | join(', ', attribute='role') }}", v),
            "[1, 3] system, user, user");
}

TEST(JinjaFilters, NumberFilters) {
  EXPECT_EQ(render("{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '0x1A' | "
                   "int(0, 16) }}"),
            "42 4 0 7 3 26");
  EXPECT_EQ(render("{{ '2.5' | float }} {{ 3 | float }} {{ -3 | abs }} {{ 2.675 | round(1) }} {{ 2.5 | round }} {{ 2.1 "
                   "| round(0, 'ceil') }}"),
            "2.5 3.0 3 2.7 2.0 3.0");
}

TEST(JinjaFilters, ItemsAndDictMethods) {
  const std::string v = R"({"d": {"b": 1, "a": [2]}})";
  EXPECT_EQ(render("{{ d | items | list }} {{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }}", v),
            "[('b', 1), ('a', [2])] [('b', 1), ('a', [2])] ['b', 'a'] [1, [2]]");
  EXPECT_EQ(render("{{ d.get('b') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d['items'] is defined }}", v),
            "1 None dflt True");
  EXPECT_TRUE(fails_with("{{ 5 | items }}", "mapping"));
}

TEST(JinjaFilters, ToJsonMatchesPythonJsonDumps) {
  const std::string v =
      R"({"x": {"s": "é \"q\" \\ \n\t\u0001 </b>", "n": [1, 2.5, 1.0, -0.0, true, null], "e": {}, "l": []}})";
  EXPECT_EQ(render("{{ x | tojson }}", v),
            R"({"s": "é \"q\" \\ \n\t\u0001 </b>", "n": [1, 2.5, 1.0, -0.0, true, null], "e": {}, "l": []})");
  EXPECT_EQ(render("{{ {'a': [1, {'b': 2}], 'c': []} | tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ],\n  \"c\": []\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ [1, 2] | tojson(separators=[',', ':']) }}"),
            R"({"a": 2, "b": 1} [1,2])");
  EXPECT_EQ(render("{{ 'é😀' | tojson(ensure_ascii=true) }} {{ 'x' | tojson }} {{ 3 | tojson }}"),
            R"("\u00e9\ud83d\ude00" "x" 3)");
}

// ---- tests ("is ...") -------------------------------------------------------------------------------

TEST(JinjaTests, TypeTests) {
  const std::string v = R"({"s": "x", "n": 1, "f": 1.5, "l": [], "d": {}, "z": null, "b": false})";
  EXPECT_EQ(
      render("{{ s is string }}{{ n is string }} {{ n is number }}{{ f is number }}{{ b is number }}{{ s is number }} "
             "{{ n is integer }}{{ f is float }} {{ d is mapping }}{{ l is mapping }}",
             v),
      "TrueFalse TrueTrueTrueFalse TrueTrue TrueFalse");
  EXPECT_EQ(render("{{ l is iterable }}{{ s is iterable }}{{ d is iterable }}{{ n is iterable }}{{ q is iterable }} "
                   "{{ l is sequence }}{{ s is sequence }}{{ n is sequence }} {{ z is none }}{{ n is not none }}",
                   v),
            "TrueTrueTrueFalseTrue TrueTrueFalse TrueTrue");
  EXPECT_EQ(render("{{ b is boolean }}{{ n is boolean }} {{ b is false }}{{ 0 is false }}{{ true is true }} "
                   "{{ range is callable }}{{ s is defined }}{{ q is undefined }}",
                   v),
            "TrueFalse TrueFalseTrue TrueTrueTrue");
}

TEST(JinjaTests, ValueTests) {
  EXPECT_EQ(render("{{ 3 is odd }}{{ 3 is even }} {{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }} "
                   "{{ 2 is equalto 2 }}{{ 'a' is eq('b') }} {{ 'a' is in 'cat' }}{{ 2 is in [1] }} "
                   "{{ 3 is gt 2 }}{{ 3 is lt 2 }} {{ 'ab' is lower }}{{ 'AB' is upper }}"),
            "TrueFalse TrueFalse TrueFalse TrueFalse TrueFalse TrueTrue");
  EXPECT_EQ(render("{{ none is sameas none }}{{ [] is sameas [] }}{% set x = [] %}{{ x is sameas x }}"),
            "TrueFalseTrue");
}

// ---- methods and globals ----------------------------------------------------------------------------

TEST(JinjaMethods, StringMethods) {
  EXPECT_EQ(
      render(
          "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith(('x', 'a')) }} "
          "{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a-b-c'.split('-', 1) }} {{ 'a-b-c'.rsplit('-', 1) }}"),
      "TrueTrueTrue ['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b-c'] ['a-b', 'c']");
  EXPECT_EQ(render("[{{ '\n\nx\n'.strip('\n') }}][{{ '\n\nx\n'.lstrip('\n') }}][{{ '\n\nx\n'.rstrip('\n') }}][{{ '  y "
                   "'.strip() }}]"),
            "[x][x\n][\n\nx][y]");
  EXPECT_EQ(
      render("{{ 'Hi'.upper() }} {{ 'Hi'.lower() }} {{ 'hello wORLD'.title() }} {{ 'aXa'.replace('a', '-') }} "
             "{{ 'héllo'.find('l') }} {{ 'abc'.find('z') }} {{ 'banana'.count('an') }} {{ '-'.join(['a', 'b']) }}"),
      "HI hi Hello World -X- 2 -1 2 a-b");
  EXPECT_EQ(render("{{ 'a\nb'.splitlines() }} {{ '12'.isdigit() }} {{ 'x'.capitalize() }}"), "['a', 'b'] True X");
  EXPECT_TRUE(fails_with("{{ 'a'.nosuchmethod() }}", "'str object' has no attribute 'nosuchmethod'"));
}

// The linear-time rewrites of searching, splitting and slicing keep Python's results, UTF-8 included.
TEST(JinjaMethods, SearchSplitAndSliceMatchPython) {
  EXPECT_EQ(render("{{ '  a b c  '.split(None, 1) }} {{ '  a b c  '.rsplit(None, 1) }} {{ 'a b'.split(None, 0) }} "
                   "{{ '  a b'.rsplit(None, 0) }}"),
            "['a', 'b c  '] ['  a b', 'c'] ['a b'] ['  a b']");
  EXPECT_EQ(render("{{ 'aaa'.rsplit('aa', 1) }} {{ 'aaa'.split('aa', 1) }} {{ 'aaaa'.rfind('aa') }} "
                   "{{ 'héllo'.rfind('l') }} {{ 'ééxé'.strip('é') }}"),
            "['a', ''] ['', 'a'] 2 3 x");
  EXPECT_EQ(render("{{ 'abc'.replace('', '-') }} {{ 'abc'.replace('', '-', 2) }} {{ 'abc' | replace('b', 'xyz') }}"),
            "-a-b-c- -a-bc axyzc");
  EXPECT_EQ(render("{{ 'héllo'[1] }} {{ 'héllo'[-1] }} {{ 'héllo'[1:3] }} {{ 'héllo'[::-1] }} {{ 'héllo'[::2] }} "
                   "{{ 'héllo' | reverse }} {{ 'héllo' | first }}{{ 'héllo' | last }} [{{ 'é' | center(4) }}]"),
            "é o él olléh hlo olléh ho [ é  ]");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1, 2] * 2 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ [2] }} {{ [3, 1, 2] | sort }} "
                   "{{ ['b', 'A', 'a'] | unique | list }} {{ [[1, 2], [1, 2]] | unique | list }}"),
            "ababab [1, 2, 1, 2] [1, 2] a1[2] [1, 2, 3] ['b', 'A'] [[1, 2]]");
  EXPECT_EQ(render("{% set l = [1, [2]] %}{{ l == l }} {{ [1, [2]] == [1, [2]] }} {{ [2] in l }} {{ l.count(1) }} "
                   "{{ {'a': 1, 'a': 2} }} {{ 'x\ny' | indent(2, true) }}"),
            "True True True 1 {'a': 2}   x\n  y");
}

TEST(JinjaGlobals, RangeNamespaceDictRaiseAndStrftime) {
  EXPECT_EQ(
      render("{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(10, 0, -3) | list }} {{ range(0) | list }}"),
      "[0, 1, 2] [1, 2, 3] [10, 7, 4, 1] []");
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.b = 2 %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}"),
            "12False");
  EXPECT_EQ(render("{{ dict(a=1, b='x') }}"), "{'a': 1, 'b': 'x'}");
  EXPECT_TRUE(fails_with("text{{ raise_exception('Bad role: ' ~ 'x') }}", "template raised an error: Bad role: x"));
  RenderOptions at_noon;
  at_noon.now = 1721908800;  // 2024-07-25 12:00 UTC
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d') }} {{ strftime_now('%d %B %Y') }}", "{}", at_noon),
            "2024-07-25 25 July 2024");
  EXPECT_EQ(render("{% set j = joiner('+') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}"), "1+2+3");
}

// ---- parse errors -----------------------------------------------------------------------------------

TEST(JinjaParseErrors, NameTheLineColumnAndProblem) {
  EXPECT_TRUE(fails_with("line one\n{% if x %}\nnever closed", "line 2, column 1: 'if' block is never closed"));
  EXPECT_TRUE(fails_with("a\nb {% frobnicate %}", "line 2, column 6: unknown statement 'frobnicate'"));
  EXPECT_TRUE(fails_with("{% for x in y %}\n{% endif %}", "line 2, column 4: unexpected 'endif'"));
  EXPECT_TRUE(fails_with("\n\n  {{ 'unterminated }}", "line 3, column 6: unterminated string literal"));
  EXPECT_TRUE(fails_with("{{ x | nosuchfilter }}", "line 1, column 6: unknown filter 'nosuchfilter'"));
  EXPECT_TRUE(fails_with("{% if x is nosuchtest %}{% endif %}", "unknown test 'nosuchtest'"));
  EXPECT_TRUE(fails_with("ab\n{{ x ",
                         "line 2, column 1: unexpected end of template: this tag is never closed (expected '}}')"));
  EXPECT_TRUE(fails_with("{{ x }", "unexpected '}'"));
  EXPECT_TRUE(fails_with("{{ (1 + 2 }}", "expected ')'"));
  EXPECT_TRUE(fails_with("{# open comment", "unterminated comment"));
  EXPECT_TRUE(fails_with("{{ 1 ? 2 }}", "unexpected character '?'"));
  EXPECT_TRUE(fails_with("{% set x %}no end", "'set' block is never closed"));
  EXPECT_TRUE(fails_with("{% include 'other.jinja' %}", "not supported"));
  EXPECT_TRUE(fails_with("{% macro m( %}{% endmacro %}", "unexpected '}', expected ')'"));
  EXPECT_TRUE(fails_with("{% macro m(1) %}{% endmacro %}", "expected a parameter name"));
}

TEST(JinjaRenderErrors, NameTheLineAndColumn) {
  EXPECT_TRUE(fails_with("ok\n\n   {{ 1 + 'a' }}", "line 3, column 9: unsupported operand"));
  EXPECT_TRUE(fails_with("{% for m in messages %}\n  {{ m.content.nope.deeper }}\n{% endfor %}", "line 2",
                         R"({"messages": [{"content": "x"}]})"));
}

}  // namespace
}  // namespace strata::jinja
