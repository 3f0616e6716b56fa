// GBNF that forces the assistant output into tool calls of the chat format (tool_choice "required"
// or a named function). Arguments come from grammar::json_schema_to_gbnf with a per-tool prefix;
// the Qwen XML format writes string parameters raw, so those get a "text without the closing
// markers" rule instead.
#include <set>

#include "chat/chat_format.h"
#include "grammar/grammar.h"

namespace strata::chat {

namespace {

using nlohmann::json;

// Characters of reasoning the grammar allows before think_close: enough for a plan, bounded so a
// constrained request always gets to its call.
constexpr int kMaxGrammarReasoningChars = 8192;
// Longest XML string parameter with a maxLength the grammar spells out (the GBNF repetition bound).
constexpr int64_t kMaxXmlStringChars = 10000;

std::string literal(std::string_view bytes) { return grammar::gbnf_literal(bytes); }

std::string class_char(char c) {
  auto b = static_cast<unsigned char>(c);
  if (c == ']' || c == '[' || c == '\\' || c == '^' || c == '-') return std::string("\\") + c;
  if (b < 0x20) return fmt::format("\\x{:02X}", b);
  return std::string(1, c);
}

// Rules `name` (and name-N helpers) matching text that contains none of `patterns`. All patterns
// start with the same character, found nowhere else in them (true of "</think>" and the XML closing
// tags), so after a mismatch the text can only be inside a pattern again by that character. `repeat`
// is the repetition ("*" or "{0,N}") of the top-level unit. Otherwise the first character is left out
// altogether (stricter than needed, still never a closing marker).
std::string text_without(const std::string& name, const std::vector<std::string>& patterns,
                         const std::string& repeat) {
  char first = patterns.empty() || patterns[0].empty() ? '\0' : patterns[0][0];
  bool simple = first != '\0';
  for (const auto& p : patterns) {
    if (p.size() < 2 || p[0] != first || p.find(first, 1) != std::string::npos) simple = false;
  }
  std::string f = class_char(first);
  if (!simple) return fmt::format("{} ::= [^{}]{}\n", name, f, repeat);
  // One rule per proper prefix of the patterns (a trie): prefix -> rule name.
  std::vector<std::string> prefixes;
  std::set<std::string> seen;
  for (const auto& p : patterns) {
    for (size_t n = 1; n < p.size(); ++n) {
      if (seen.insert(p.substr(0, n)).second) prefixes.push_back(p.substr(0, n));
    }
  }
  std::set<std::string> whole(patterns.begin(), patterns.end());
  auto rule_of = [&](const std::string& prefix) {
    for (size_t i = 0; i < prefixes.size(); ++i) {
      if (prefixes[i] == prefix) return fmt::format("{}-{}", name, i);
    }
    return std::string();
  };
  const std::string again = literal(std::string(1, first)) + " " + rule_of(prefixes[0]);
  // The text may end inside a pattern's beginning ("a </" before "\n</parameter>"): the closing
  // marker that follows cannot then appear earlier, since its first character is found only there.
  std::vector<std::string> ends;
  for (const auto& p : prefixes) ends.push_back(literal(p));
  std::string out = fmt::format("{} ::= ([^{}] | {}){} {}-end?\n{}-end ::= {}\n", name, f, again, repeat, name, name,
                                fmt::join(ends, " | "));
  for (const auto& prefix : prefixes) {
    // After `prefix`: a character that continues a pattern (not completing one), the first character
    // again, or any other character (back to plain text).
    std::set<char> next;
    std::vector<std::string> alts;
    for (const auto& p : patterns) {
      if (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0) next.insert(p[prefix.size()]);
    }
    std::string excluded = f;
    for (char c : next) {
      if (c != first) excluded += class_char(c);
      std::string longer = prefix + c;
      if (!whole.count(longer)) alts.push_back(literal(std::string(1, c)) + " " + rule_of(longer));
    }
    alts.push_back(again);
    alts.push_back("[^" + excluded + "]");
    out += rule_of(prefix) + " ::= " + fmt::format("{}", fmt::join(alts, " | ")) + "\n";
  }
  return out;
}

template <typename Json>
std::set<std::string> schema_types(const Json& schema) {
  std::set<std::string> types;
  if (!schema.is_object()) return types;
  auto t = schema.find("type");
  if (t != schema.end() && t->is_string()) types.insert(t->template get<std::string>());
  if (t != schema.end() && t->is_array()) {
    for (const auto& i : *t) {
      if (i.is_string()) types.insert(i.template get<std::string>());
    }
  }
  return types;
}

// The value of one XML parameter: raw text for strings (an enum of strings: one of them), the JSON
// grammar of its schema otherwise.
template <typename Json>
Result<std::string> xml_value_rule(const Json& schema, const std::string& prefix, std::string* rules) {
  auto e = schema.is_object() ? schema.find("enum") : schema.end();
  if (e != schema.end() && e->is_array() && !e->empty()) {
    std::vector<std::string> alts;
    bool all_strings = true;
    for (const auto& v : *e) {
      if (!v.is_string()) all_strings = false;
      else alts.push_back(literal(v.template get<std::string>()));
    }
    if (all_strings) return "(" + fmt::format("{}", fmt::join(alts, " | ")) + ")";
  }
  if (auto c = schema.is_object() ? schema.find("const") : schema.end(); c != schema.end() && c->is_string()) {
    return literal(c->template get<std::string>());
  }
  if (schema_types(schema).count("string") || !schema.is_object() || schema.empty()) {
    auto min = schema.is_object() ? schema.find("minLength") : schema.end();
    auto max = schema.is_object() ? schema.find("maxLength") : schema.end();
    if (min == schema.end() && max == schema.end()) return std::string("xml-text");
    // A length bound: characters other than '<' (so no closing tag can start), counted exactly.
    int64_t lo = min != schema.end() && min->is_number_integer() ? min->template get<int64_t>() : 0;
    int64_t hi = max != schema.end() && max->is_number_integer() ? max->template get<int64_t>() : kMaxXmlStringChars;
    hi = std::min<int64_t>(hi, kMaxXmlStringChars);  // stricter than asked, still within the schema
    if (lo < 0 || lo > hi) return make_error(ErrorCode::kInvalidArgument, "minLength/maxLength out of range");
    return fmt::format("[^<]{{{},{}}}", lo, hi);
  }
  // Qwen's templates write booleans and null with Python's str(); the parser reads both spellings.
  std::set<std::string> types = schema_types(schema);  // NOLINT
  if (types == std::set<std::string>{"boolean"}) return std::string(R"(("true" | "false" | "True" | "False"))");
  if (types == std::set<std::string>{"null"}) return std::string(R"(("null" | "None"))");
  STRATA_ASSIGN(std::string g, grammar::json_schema_to_gbnf(schema, prefix));
  *rules += g + "\n";
  return prefix + "root";
}

template <typename Json>
Result<std::string> xml_call_rule(const std::string& name, const Json& params, const std::string& prefix,
                                  std::string* rules) {
  std::string body = literal("<function=" + name + ">\n");
  std::set<std::string> required;
  if (auto r = params.find("required"); r != params.end() && r->is_array()) {
    for (const auto& k : *r) {
      if (k.is_string()) required.insert(k.template get<std::string>());
    }
  }
  auto props = params.find("properties");
  if (props != params.end() && props->is_object()) {
    int j = 0;
    for (const auto& [key, schema] : props->items()) {
      if (key.empty() || key.find_first_of("<>\n") != std::string::npos) {
        return make_error(ErrorCode::kInvalidArgument, "parameter \"{}\" cannot be written as <parameter=..>",
                          key.substr(0, 64));
      }
      STRATA_ASSIGN(std::string value, xml_value_rule(schema, fmt::format("{}p{}-", prefix, j++), rules));
      std::string param = literal("<parameter=" + key + ">\n") + " " + value + " " + literal("\n</parameter>\n");
      body += required.count(key) ? " " + param : " (" + param + ")?";
    }
  }
  return body + " " + literal("</function>");
}

Result<std::string> call_rule(const ChatFormat& format, const ToolSpec& tool, size_t i, std::string* rules) {
  std::string prefix = fmt::format("t{}-", i);
  // The client's property order when it is known: models write arguments in schema order.
  const bool ordered = tool.parameters_in_order.is_object();
  if (format.tools == ToolFormat::kQwenXml) {
    return ordered ? xml_call_rule(tool.name, tool.parameters_in_order, prefix, rules)
                   : xml_call_rule(tool.name, tool.parameters, prefix, rules);
  }
  STRATA_ASSIGN(std::string g, ordered ? grammar::json_schema_to_gbnf(tool.parameters_in_order, prefix)
                                       : grammar::json_schema_to_gbnf(tool.parameters, prefix));
  *rules += g + "\n";
  std::string key = format.tools == ToolFormat::kLlama3Json ? "parameters" : "arguments";
  return literal("{\"name\": \"" + tool.name + "\", \"" + key + "\": ") + " " + prefix + "root " + literal("}");
}

}  // namespace

Result<std::string> tool_call_grammar(const ChatFormat& format, const std::vector<ToolSpec>& tools,
                                      const ToolChoice& choice, bool parallel, bool starts_in_reasoning) {
  if (choice.kind == ToolChoice::kAuto || choice.kind == ToolChoice::kNone) return std::string();
  if (format.tools == ToolFormat::kNone) {
    return make_error(ErrorCode::kInvalidArgument, "tool_choice: the chat template has no tool call format");
  }
  std::string rules;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (choice.kind == ToolChoice::kFunction && tools[i].name != choice.function) continue;
    auto rule = call_rule(format, tools[i], i, &rules);
    if (!rule.ok()) {
      return make_error(ErrorCode::kInvalidArgument, "tools[{}] ({}): {}", i, tools[i].name, rule.error().message);
    }
    rules += fmt::format("t{}-call ::= {}\n", i, *rule);
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (choice.kind != ToolChoice::kFunction || tools[i].name == choice.function) names.push_back(fmt::format("t{}-call", i));
  }
  if (names.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "tool_choice: no tool \"{}\" to call", choice.function.substr(0, 64));
  }
  std::string any = fmt::format("{}", fmt::join(names, " | "));
  std::string call = format.tools == ToolFormat::kLlama3Json
                         ? "(" + any + ")"
                         : literal("<tool_call>\n") + " (" + any + ") " + literal("\n</tool_call>");
  // Parallel: as many calls as the parser reads (kMaxToolCalls).
  rules += "calls ::= call-one" + (parallel ? fmt::format(" (\"\\n\" call-one){{0,{}}}", kMaxToolCalls - 1) : "") + "\n";
  if (format.tools == ToolFormat::kQwenXml) rules += text_without("xml-text", {"</parameter>", "</function>", "</tool_call>"}, "*");
  return reasoning_then(format, starts_in_reasoning, "calls", "call-one ::= " + call + "\n" + rules);
}

std::string reasoning_then(const ChatFormat& format, bool starts_in_reasoning, const std::string& body_rule,
                           const std::string& rules) {
  std::string root = "root ::= ";
  std::string think_rules;
  if (format.thinking && !format.think_open.empty() && !format.think_close.empty()) {
    std::string think = "think-text " + literal(format.think_close) + " think-ws";
    root += starts_in_reasoning ? think + " " : "(" + literal(format.think_open) + " " + think + ")? ";
    think_rules += text_without("think-text", {format.think_close}, fmt::format("{{0,{}}}", kMaxGrammarReasoningChars));
    think_rules += "think-ws ::= \"\\n\"{0,2}\n";
  }
  return root + body_rule + "\n" + rules + think_rules;
}

}  // namespace strata::chat
