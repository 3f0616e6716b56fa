// Chat output formats per template family: which family a chat template belongs to, the OpenAI `tools`
// and `tool_choice` fields, and an incremental parser that splits generated text into reasoning,
// content and tool calls (streamed as OpenAI-style deltas), plus the GBNF that forces tool calls.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace strata::chat {

enum class ToolFormat {
  kNone,
  kHermesJson,  // <tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>: Qwen2.5, Qwen3, Hermes
  kQwenXml,     // Qwen3-Coder / Qwen3.5 / Qwen3.6: <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n
                // </parameter>\n</function>\n</tool_call>
  kLlama3Json,  // Llama 3.x: {"name": .., "parameters": {..}} (optionally after <|python_tag|>)
  kGeneric,     // llama-server's generic format, for templates without one: the answer is one JSON
                // object, {"tool_call": {..}}, {"tool_calls": [..]} or {"response": ".."} (generic_tools.cpp)
};

std::string_view tool_format_name(ToolFormat format);

struct ChatFormat {
  ToolFormat tools = ToolFormat::kNone;
  bool thinking = false;  // the template emits/accepts <think>...</think>
  std::string think_open = "<think>", think_close = "</think>";
};

// Which family a chat template is, from its source. A template that writes <function=..> and
// <parameter=..> is kQwenXml; one that mentions <tool_call> is kHermesJson; a Llama 3 header template
// that mentions <|python_tag|> or "parameters" is kLlama3Json; anything else kNone. Never fails.
ChatFormat detect_format(std::string_view template_source);

// Whether a rendered prompt leaves the model inside an open think block (Qwen3.5/3.6 end their
// generation prompt with "<think>\n"): the prompt, trailing whitespace aside, ends with think_open.
// This is OutputParser's starts_in_reasoning.
bool prompt_opens_reasoning(const ChatFormat& format, std::string_view prompt);

struct ToolSpec {  // one OpenAI function tool
  std::string name;
  std::string description;
  nlohmann::json parameters;  // a JSON schema object ({"type":"object","properties":{}} when absent)
  // The same schema in the client's key order, when parse_tools was given an ordered_json (null
  // otherwise): tool_call_grammar then lists properties in that order, the order models write them.
  nlohmann::ordered_json parameters_in_order = nullptr;
};

// Validates an OpenAI `tools` array: each {"type":"function","function":{"name","description"?,
// "parameters"?}}, names [A-Za-z0-9_-]{1,64} and unique, parameters an object; at most kMaxTools tools
// and schemas nested at most kMaxSchemaDepth deep. The error names the field (tools[2].function.name).
inline constexpr size_t kMaxTools = 256;
inline constexpr int kMaxSchemaDepth = 64;
Result<std::vector<ToolSpec>> parse_tools(const nlohmann::json& tools);
// The same from a body parsed as ordered_json, keeping each schema's key order (parameters_in_order).
Result<std::vector<ToolSpec>> parse_tools_ordered(const nlohmann::ordered_json& tools);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;  // a JSON object's text
  bool operator==(const ToolCall&) const = default;
};

struct ToolCallDelta {  // one OpenAI streaming piece: id and name come once, in the call's first piece
  int32_t index = 0;
  std::string id, name, arguments;
};

struct OutputDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// Caps on what the parser holds: text held back while it may still be an uncommitted call (or an
// XML value), and one call's text. Beyond them the held text is released as content and a started
// call is closed.
inline constexpr size_t kMaxHeldBytes = size_t{1} << 20;
inline constexpr size_t kMaxCallBytes = size_t{1} << 20;
inline constexpr size_t kMaxToolCalls = 256;
// Whitespace the parser looks ahead over or holds back (before a marker that may come, at the end of
// reasoning) is bounded too: only the last kMaxHeldWhitespace bytes of a run are held (and dropped
// before a call or at the end of reasoning), and a longer run where a marker might follow means "no
// marker". This keeps every push linear in its size.
inline constexpr size_t kMaxHeldWhitespace = 256;

// Incremental parser of generated text. Text arrives in pieces of whole UTF-8 characters that may cut
// a marker ("<tool_call>", "</think>") in two: it holds back only what may still be the start of a
// marker (or of a call) and releases the rest. Invariant: the concatenation of every delta's fields
// (and of one index's `arguments`) equals reasoning(), content() and tool_calls() at every point.
//
// * Reasoning: text up to think_close is reasoning when starts_in_reasoning or when the output starts
//   (after whitespace) with think_open; tags are removed and the reasoning is trimmed of whitespace
//   at both ends, as is the content's start after think_close (llama-server does the same).
//   split_reasoning false: everything stays in content verbatim, tags included.
// * Tool calls (parse_tools): a call is committed, and its first delta (index, id, name) emitted, as
//   soon as its name is known; JSON arguments then stream as they arrive (held only at points the
//   text could not yet be closed into valid JSON), XML arguments at the end of each parameter. A
//   committed call is never taken back: if its text breaks off or turns malformed, its arguments are
//   closed into valid JSON and the rest of the text is content. Text that never became a committed
//   call (a marker followed by something else, an unterminated "<tool_call>\n{\"na") is content;
//   a JSON call whose keys come in another order is held whole and parsed at its end (or at finish()).
//   Content before a call is content, whitespace before, between and after calls is dropped.
// * Ids: "call_" + 24 alphanumerics from a per-parser generator (random; set_call_id_seed makes them
//   deterministic).
class OutputParser {
 public:
  // starts_in_reasoning: the prompt ended inside an open think_open (the generation prompt opened it).
  // split_reasoning: false for --reasoning-format none. parse_tools: a request with tools (and
  // tool_choice != none). tools: their schemas, used to type kQwenXml parameter values (without
  // them every value is a string).
  OutputParser(ChatFormat format, bool starts_in_reasoning, bool split_reasoning, bool parse_tools,
               std::vector<ToolSpec> tools = {});
  ~OutputParser();
  OutputParser(OutputParser&&) noexcept;
  OutputParser& operator=(OutputParser&&) noexcept;

  OutputDelta push(std::string_view text);
  // End of generation: releases held text; a call whose JSON is complete but unterminated is parsed,
  // other uncommitted call text is content, a committed call is closed. Later pushes are ignored.
  OutputDelta finish();

  const std::string& reasoning() const;
  const std::string& content() const;
  const std::vector<ToolCall>& tool_calls() const;
  void set_call_id_seed(uint64_t seed);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

struct ToolChoice {
  enum Kind { kAuto, kNone, kRequired, kFunction } kind = kAuto;
  std::string function;  // kFunction: the tool's name
};

// "auto" / "none" / "required" / {"type":"function","function":{"name":..}} (a name among `tools`);
// null means auto. "required" or a function with no tools is an error.
Result<ToolChoice> parse_tool_choice(const nlohmann::json& j, const std::vector<ToolSpec>& tools);

// GBNF (root rule `root`) constraining the whole assistant output to one call (or, when parallel,
// one or more, "\n" between them) in the format, with arguments valid for each tool's parameters
// schema (grammar::json_schema_to_gbnf, rule prefix "t<i>-"; properties in the key order of
// nlohmann::json, i.e. sorted); kFunction allows only that tool. A thinking format first allows a
// reasoning part of at most 8192 characters without think_close, then think_close: required when
// starts_in_reasoning, an optional think_open..think_close block otherwise. Qwen XML writes string
// parameters raw: any text without </parameter>, </function> or </tool_call> (with minLength /
// maxLength: that many characters other than '<'; pattern and format are not enforced), booleans as
// true/false/True/False, other types as the JSON their schema allows. kAuto and kNone need no
// grammar: the result is "". Error when a schema cannot be converted (names the tool) or the format
// has no tool calls.
Result<std::string> tool_call_grammar(const ChatFormat& format, const std::vector<ToolSpec>& tools,
                                      const ToolChoice& choice, bool parallel, bool starts_in_reasoning);

// The generic format (ToolFormat::kGeneric) for a template without a tool-call format: the system
// prompt text that describes the tools and the answer's JSON shape, and the grammar that makes every
// answer such an object: a call of one of the tools (of the named one for kFunction) for kRequired and
// kFunction, a call or {"response": text} for kAuto; "" for kNone. `parallel` asks for "tool_calls",
// a list of one or more calls, instead of one "tool_call".
std::string generic_tools_instruction(const std::vector<ToolSpec>& tools, bool parallel);
Result<std::string> generic_tool_grammar(const ChatFormat& format, const std::vector<ToolSpec>& tools,
                                         const ToolChoice& choice, bool parallel, bool starts_in_reasoning);

// A grammar whose root is a bounded reasoning part (required when the prompt opened it, optional for
// a thinking format otherwise, absent without one), then `body_rule`, defined in `rules` (GBNF rules
// that must not define root, think-text or think-ws). So a constrained answer of a thinking model
// can close its reasoning first instead of writing the constrained text as reasoning.
std::string reasoning_then(const ChatFormat& format, bool starts_in_reasoning, const std::string& body_rule,
                           const std::string& rules);

}  // namespace strata::chat
