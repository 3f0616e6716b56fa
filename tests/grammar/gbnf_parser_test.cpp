// GBNF parsing: llama.cpp-style grammars parse and match exactly their language (checked byte by
// byte through a Matcher), errors carry positions, and hostile grammars are refused cleanly.
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar_test_util.h"

namespace strata::grammar {
namespace {

using testing_util::matches;
using testing_util::must_parse;

constexpr const char* kJsonGrammar = R"(# JSON, in the style of llama.cpp's grammars/json.gbnf
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(GbnfParser, json_grammar_matches_json_and_nothing_else) {
  auto g = must_parse(kJsonGrammar);
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(g, R"({"a": [1, 2.5e3, "x\u00e9"], "b": {"c": null}})"));
  EXPECT_TRUE(matches(g, "{\n  \"k\": \"caf\xC3\xA9 \xF0\x9F\x98\x80\"}"));
  EXPECT_TRUE(matches(g, "{}"));
  EXPECT_FALSE(matches(g, R"({"a" 1})"));
  EXPECT_FALSE(matches(g, R"({"a": tru})"));
  EXPECT_FALSE(matches(g, R"([1, 2])"));  // root is an object
  EXPECT_FALSE(matches(g, "{\"a\": \"\x01\"}"));
  EXPECT_FALSE(matches(g, "{\"a\": \"\xC3\"}"));  // a lone lead byte is not a character
}

TEST(GbnfParser, arithmetic_grammar_with_recursion_through_groups) {
  auto g = must_parse(R"g(
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(g, "1+2=3\n"));
  EXPECT_TRUE(matches(g, "(a*b)=c\nx_1 /2=y\n"));
  EXPECT_FALSE(matches(g, "1+=2\n"));
  EXPECT_FALSE(matches(g, "(a=b\n"));
  EXPECT_FALSE(matches(g, ""));
}

TEST(GbnfParser, classes_are_code_points_and_literals_take_escapes) {
  auto greek = must_parse("root ::= [\xCE\xB1-\xCF\x89]+ \"!\"");  // [α-ω]+
  EXPECT_TRUE(matches(greek, "\xCE\xB1\xCE\xB2\xCF\x89!"));
  EXPECT_FALSE(matches(greek, "ab!"));
  EXPECT_FALSE(matches(greek, "\xCE!"));
  auto not_a = must_parse("root ::= [^a]");
  EXPECT_TRUE(matches(not_a, "\xC3\xA9"));
  EXPECT_TRUE(matches(not_a, "\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(not_a, "a"));
  EXPECT_FALSE(matches(not_a, "\xED\xA0\x80"));  // a surrogate is not UTF-8
  EXPECT_FALSE(matches(not_a, "\xC3\xA9\xC3\xA9"));
  auto any = must_parse("root ::= . .");
  EXPECT_TRUE(matches(any, "a\xE2\x82\xAC"));
  EXPECT_FALSE(matches(any, "a"));
  auto esc = must_parse(R"(root ::= "\x41\u00e9\n\t\"\\" [\]\-])");
  EXPECT_TRUE(matches(esc, "A\xC3\xA9\n\t\"\\]"));
  EXPECT_TRUE(matches(esc, "A\xC3\xA9\n\t\"\\-"));
  auto hex_class = must_parse(R"(root ::= [\u4e00-\u9fff]{2})");
  EXPECT_TRUE(matches(hex_class, "\xE4\xB8\xAD\xE6\x96\x87"));  // 中文
}

TEST(GbnfParser, counted_repetitions) {
  auto g = must_parse(R"(root ::= "ab"{2,3} x{2,} y{3} z?
x ::= "x"
y ::= [0-9]
z ::= "z")");
  EXPECT_TRUE(matches(g, "ababxx123"));
  EXPECT_TRUE(matches(g, "abababxxxxx123z"));
  EXPECT_FALSE(matches(g, "abxx123"));
  EXPECT_FALSE(matches(g, "ababababxx123"));
  EXPECT_FALSE(matches(g, "ababx123"));
  EXPECT_FALSE(matches(g, "ababxx12"));
  auto big = must_parse(R"(root ::= "a"{0,10000} "b")");
  EXPECT_TRUE(matches(big, std::string(10000, 'a') + "b"));
  EXPECT_FALSE(matches(big, std::string(10001, 'a') + "b"));
}

TEST(GbnfParser, alternatives_may_continue_on_the_next_line) {
  auto g = must_parse("root ::= \"a\"\n  | \"b\" # comment\nother ::= \"c\"\n");
  EXPECT_TRUE(matches(g, "a"));
  EXPECT_TRUE(matches(g, "b"));
  EXPECT_FALSE(matches(g, "c"));
}

// The error of parsing `text`, or a failure when it parses.
std::string error_of(std::string_view text) {
  auto g = parse_gbnf(text);
  if (g.ok()) {
    ADD_FAILURE() << "parsed: " << text.substr(0, 200);
    return {};
  }
  EXPECT_EQ(g.error().code, ErrorCode::kInvalidArgument);
  return g.error().message;
}

TEST(GbnfParser, errors_name_the_line_column_and_the_problem) {
  EXPECT_EQ(error_of("root ::= \"abc"), "grammar line 1, column 10: unterminated literal");
  EXPECT_EQ(error_of("root ::= \"a\"\nx ::= [a-"), "grammar line 2, column 7: unterminated character class");
  EXPECT_EQ(error_of("root ::= foo \"a\""), "grammar line 1, column 10: undefined rule 'foo'");
  EXPECT_EQ(error_of("foo ::= \"a\""), "grammar has no rule named 'root'");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "grammar line 2, column 1: rule 'root' is defined twice");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar line 1, column 11: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= [z-a]"), "grammar line 1, column 10: class range U+7A-U+61 is reversed");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}"), "grammar line 1, column 13: repetition {3,1} has max below min");
  EXPECT_EQ(error_of("root ::= * \"a\""), "grammar line 1, column 10: '*' repeats nothing");
  EXPECT_EQ(error_of("root ::= (\"a\""), "grammar line 1, column 10: unclosed '('");
  EXPECT_EQ(error_of("root = \"a\""), "grammar line 1, column 6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("root ::= \"\\uD800\""), "grammar line 1, column 11: U+D800 is not a character");
  EXPECT_EQ(error_of("root ::= \"a\" )"), "grammar line 1, column 14: unexpected ')'");
}

TEST(GbnfParser, hostile_grammars_are_refused_cleanly) {
  EXPECT_NE(error_of("root ::= \"a\"{1000000}").find("repetition count is over the limit of 10000"), std::string::npos);
  const std::string deep = "root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')');
  EXPECT_NE(error_of(deep).find("parentheses nested deeper than 64"), std::string::npos);
  std::string many = "root ::=";
  for (int i = 0; i < 20; ++i) many += " \"a\"{0,10000}";
  EXPECT_NE(error_of(many).find("more than 100000 rules"), std::string::npos);
  std::string wide = "root ::=";
  for (int i = 0; i < 300; ++i) wide += " \"a\"{10000}";
  EXPECT_NE(error_of(wide).find("grammar expands to more than"), std::string::npos);
  EXPECT_NE(error_of(std::string(kMaxGrammarBytes + 1, ' ')).find("over the limit"), std::string::npos);
  EXPECT_EQ(error_of("root ::= \"a\" root"), "grammar matches no finite text: rule 'root' never ends");
  EXPECT_EQ(error_of("root ::= [] \"a\""), "grammar matches no finite text: rule 'root' never ends");
  EXPECT_EQ(error_of("root ::= \"\xFF\""), "grammar line 1, column 11: invalid UTF-8 in the grammar");
  // Found by fuzz_grammar: a 4-byte sequence past U+10FFFF; also a surrogate and an overlong form.
  EXPECT_EQ(error_of("root ::= \"\xF6\x8B\x92\x8D\""), "grammar line 1, column 11: invalid UTF-8 in the grammar");
  EXPECT_EQ(error_of("root ::= [\xED\xA0\x80]"), "grammar line 1, column 11: invalid UTF-8 in the grammar");
  EXPECT_EQ(error_of("root ::= \"\xC0\xAF\""), "grammar line 1, column 11: invalid UTF-8 in the grammar");
}

TEST(GbnfParser, left_recursion_is_refused_with_the_cycle) {
  EXPECT_EQ(error_of("root ::= root \"a\" | \"b\""), "left recursion is not supported: root -> root");
  // Through a nullable prefix and another rule.
  EXPECT_EQ(error_of("root ::= a\na ::= b? root \"x\" | \"y\"\nb ::= \"z\""),
            "left recursion is not supported: root -> a -> root");
  // Right recursion is fine.
  auto g = must_parse("root ::= \"a\" root | \"b\"");
  EXPECT_TRUE(matches(g, "aaab"));
}

TEST(GbnfParser, unproductive_alternatives_are_dropped_so_generation_cannot_dead_end) {
  auto g = must_parse("root ::= \"a\" loop | \"b\"\nloop ::= \"c\" loop");
  EXPECT_TRUE(matches(g, "b"));
  Matcher m(g, testing_util::byte_vocab());
  EXPECT_FALSE(m.allows('a'));  // would lead into a rule that never ends
  EXPECT_TRUE(m.allows('b'));
}

}  // namespace
}  // namespace strata::grammar
