// OutputParser's state machine, shared by output_parser.cpp (reasoning, content, markers) and
// tool_calls.cpp (JSON and XML calls). Unprocessed text is buf[pos..): a state that cannot decide yet
// leaves it there (that is what "held back" means) and asks for more.
#pragma once

#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_format.h"
#include "chat/json_scan.h"

namespace strata::chat {

// What a state did with the text it was given.
enum class Progress { kMoved, kNeedMore };
// Whether the text at hand starts a call: not yet known, yes, or no.
enum class Header { kNeedMore, kMatch, kNoMatch };

inline bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
// Length of the whitespace run at the start of `s` (all of it: for text being consumed).
inline size_t skip_ws(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}
// The same, looking at most kMaxHeldWhitespace + 1 bytes ahead (more means "too long").
inline size_t leading_ws(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && i <= kMaxHeldWhitespace && is_ws(s[i])) ++i;
  return i;
}
// Where the trailing whitespace of s[0, end) starts, at most kMaxHeldWhitespace bytes back.
inline size_t trailing_ws_start(std::string_view s, size_t end) {
  size_t stop = end > kMaxHeldWhitespace ? end - kMaxHeldWhitespace : 0;
  while (end > stop && is_ws(s[end - 1])) --end;
  return end;
}

struct OutputParser::State {
  enum class Mode {
    kStart,            // before anything: an opening think tag?
    kReasoning,        // inside <think>
    kSkipWs,           // just after </think>: leading whitespace of the content is dropped
    kContentStart,     // start of content: Llama's bare JSON call?
    kContent,
    kCallOpen,         // rest() starts where a call may start (a marker, or `{` for Llama)
    kJsonHeld,         // a JSON call whose keys come in another order, held whole until </tool_call>
    kJsonArgs,         // streaming a committed call's argument object
    kJsonTail,         // the rest of the call object after the arguments
    kHermesClose,      // expecting </tool_call>
    kXmlBetween, kXmlParamName, kXmlValue, kXmlAfterFunction,
    kAfterCall,        // between calls: whitespace dropped
    kFinished,
  };

  State(ChatFormat f, bool in_reasoning, bool split, bool tools_on, std::vector<ToolSpec> specs);

  // Input and the driving loop.
  std::string_view rest() const { return std::string_view(buf).substr(pos); }
  void consume(size_t n) { pos += n; }
  void run();
  Progress step();
  Progress step_reasoning();
  Progress step_content();
  Progress step_call_open();
  Header open_xml_call(std::string_view body, size_t at);
  Progress step_json_held();
  Progress step_json_args();
  Progress step_json_tail();
  Progress step_xml_between();     // also kXmlAfterFunction
  Progress step_xml_param_name();
  Progress step_xml_value();
  Progress step_after_call();
  Progress step_generic();  // generic_tools.cpp
  void finish_reasoning();

  // Output.
  void emit_reasoning(std::string_view text);
  void emit_content(std::string_view text);
  void start_call(std::string name);
  void emit_arguments(std::string_view piece);
  // A committed call breaks off: close its arguments and send `unread` (text that belonged to it but
  // was not released) back to be read as content.
  void break_call(std::string_view unread);
  std::string make_call_id();
  bool can_start_call() const { return parse_tools && calls.size() < kMaxToolCalls; }
  std::string_view marker() const;  // the text that opens a call in content
  bool json_call_complete(std::string_view text);  // parses a whole held JSON call; emits it when valid
  void xml_add_parameter(std::string_view name, std::string_view raw);
  void xml_finish_call();

  ChatFormat format;
  bool split_reasoning;
  bool parse_tools;
  std::vector<ToolSpec> tools;

  Mode mode = Mode::kStart;
  std::string buf;
  size_t pos = 0;
  bool finishing = false;

  std::string reasoning, content;
  std::vector<ToolCall> calls;
  OutputDelta out;

  bool reasoning_started = false;
  size_t call_lead = 0;             // whitespace before the call's marker (content if it is no call)
  size_t scan_from = 0;             // kJsonHeld, kXmlValue: rest() before this holds no closing marker
  size_t call_bytes = 0;            // text consumed by the committed call
  JsonScanner args_scanner, tail_scanner;
  std::string args_text;            // argument bytes fed to args_scanner
  size_t args_released = 0;
  std::string xml_param;            // name of the parameter being read
  std::set<std::string> xml_keys;   // parameters already in the call
  std::mt19937_64 rng;
};

// The XML parameter value `raw` (framing newlines removed) as JSON text, typed by `schema` (the
// property's schema, or null): strings stay strings; numbers, booleans, null, objects and arrays are
// parsed when the schema allows them, and fall back to a string when they do not parse.
std::string xml_value_to_json(std::string_view raw, const nlohmann::json* schema);

}  // namespace strata::chat
