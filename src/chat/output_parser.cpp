// OutputParser: the driving loop, reasoning and content, and where calls start and end. The call
// bodies (JSON and XML) are in tool_calls.cpp.
#include <algorithm>

#include "chat/output_state.h"

namespace strata::chat {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  size_t n = std::min(text.size(), marker.size() - 1);
  for (; n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

OutputParser::State::State(ChatFormat f, bool in_reasoning, bool split, bool tools_on, std::vector<ToolSpec> specs)
    : format(std::move(f)), split_reasoning(split), parse_tools(tools_on && format.tools != ToolFormat::kNone),
      tools(std::move(specs)), rng(std::random_device{}()) {
  if (format.think_open.empty() || format.think_close.empty()) format.thinking = false;
  if (in_reasoning && !format.think_close.empty()) mode = Mode::kReasoning;
}

std::string_view OutputParser::State::marker() const {
  return format.tools == ToolFormat::kLlama3Json ? std::string_view("<|python_tag|>") : "<tool_call>";
}

void OutputParser::State::emit_reasoning(std::string_view text) {
  if (!split_reasoning) return emit_content(text);
  if (!reasoning_started) {
    text.remove_prefix(skip_ws(text));
    if (text.empty()) return;
    reasoning_started = true;
  }
  reasoning += text;
  out.reasoning += text;
}

void OutputParser::State::emit_content(std::string_view text) {
  content += text;
  out.content += text;
}

std::string OutputParser::State::make_call_id() {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  std::uniform_int_distribution<int> pick(0, 61);
  for (int i = 0; i < 24; ++i) id += kAlnum[pick(rng)];
  return id;
}

void OutputParser::State::start_call(std::string name) {
  ToolCall call{make_call_id(), std::move(name), ""};
  out.tool_calls.push_back(ToolCallDelta{static_cast<int32_t>(calls.size()), call.id, call.name, ""});
  calls.push_back(std::move(call));
  call_bytes = 0;
}

void OutputParser::State::emit_arguments(std::string_view piece) {
  if (piece.empty() || calls.empty()) return;
  calls.back().arguments_json += piece;
  auto index = static_cast<int32_t>(calls.size() - 1);
  if (out.tool_calls.empty() || out.tool_calls.back().index != index) {
    out.tool_calls.push_back(ToolCallDelta{index, "", "", ""});
  }
  out.tool_calls.back().arguments += piece;
}

void OutputParser::State::run() {
  while (mode != Mode::kFinished && step() == Progress::kMoved) {
  }
  if (pos > 4096 && pos * 2 > buf.size()) {  // drop consumed text now and then
    buf.erase(0, pos);
    pos = 0;
  }
}

Progress OutputParser::State::step() {
  switch (mode) {
    case Mode::kStart: {
      std::string_view r = rest();
      size_t ws = leading_ws(r);
      std::string_view after = r.substr(ws);
      const std::string& open = format.think_open;
      if (format.thinking && ws <= kMaxHeldWhitespace && after.substr(0, open.size()) == open) {
        if (!split_reasoning) emit_content(r.substr(0, ws + open.size()));
        consume(ws + open.size());
        mode = Mode::kReasoning;
        return Progress::kMoved;
      }
      bool may_open = format.thinking && ws <= kMaxHeldWhitespace &&
                      std::string_view(open).substr(0, after.size()) == after;
      if (may_open && !finishing) return Progress::kNeedMore;
      mode = Mode::kContentStart;
      return Progress::kMoved;
    }
    case Mode::kReasoning: return step_reasoning();
    case Mode::kSkipWs: {
      size_t ws = skip_ws(rest());
      consume(ws);
      if (rest().empty()) return Progress::kNeedMore;
      mode = Mode::kContentStart;
      return Progress::kMoved;
    }
    case Mode::kContentStart: {
      if (!can_start_call() || format.tools != ToolFormat::kLlama3Json) {
        mode = Mode::kContent;
        return Progress::kMoved;
      }
      std::string_view r = rest();
      size_t ws = leading_ws(r);
      if (ws == r.size() && ws <= kMaxHeldWhitespace && !finishing) return Progress::kNeedMore;
      mode = ws < r.size() && r[ws] == '{' ? Mode::kCallOpen : Mode::kContent;
      return Progress::kMoved;
    }
    case Mode::kContent: return step_content();
    case Mode::kCallOpen: return step_call_open();
    case Mode::kJsonHeld: return step_json_held();
    case Mode::kJsonArgs: return step_json_args();
    case Mode::kJsonTail:
    case Mode::kHermesClose: return step_json_tail();
    case Mode::kXmlBetween:
    case Mode::kXmlAfterFunction: return step_xml_between();
    case Mode::kXmlParamName: return step_xml_param_name();
    case Mode::kXmlValue: return step_xml_value();
    case Mode::kAfterCall: return step_after_call();
    case Mode::kFinished: return Progress::kNeedMore;
  }
  return Progress::kNeedMore;
}

Progress OutputParser::State::step_reasoning() {
  std::string_view r = rest();
  const std::string& close = format.think_close;
  size_t at = r.find(close);
  if (at != std::string_view::npos) {
    std::string_view text = r.substr(0, at);
    emit_reasoning(split_reasoning ? text.substr(0, trailing_ws_start(text, text.size())) : text);
    if (!split_reasoning) emit_content(close);
    consume(at + close.size());
    mode = split_reasoning ? Mode::kSkipWs : Mode::kContentStart;
    return Progress::kMoved;
  }
  if (finishing) {
    finish_reasoning();
    return Progress::kMoved;
  }
  size_t keep = partial_marker_suffix(r, close);
  size_t cut = r.size() - keep;
  // Trailing whitespace may be the end of the reasoning (trimmed): hold it unless it grows too long.
  if (split_reasoning) cut = trailing_ws_start(r, cut);
  if (cut == 0) return Progress::kNeedMore;
  emit_reasoning(r.substr(0, cut));
  consume(cut);
  return Progress::kNeedMore;
}

void OutputParser::State::finish_reasoning() {
  std::string_view r = rest();
  emit_reasoning(split_reasoning ? r.substr(0, trailing_ws_start(r, r.size())) : r);
  consume(r.size());
  mode = Mode::kFinished;
}

Progress OutputParser::State::step_content() {
  if (parse_tools && format.tools == ToolFormat::kGeneric) return step_generic();
  std::string_view r = rest();
  if (!can_start_call()) {
    emit_content(r);
    consume(r.size());
    return Progress::kNeedMore;
  }
  std::string_view m = marker();
  size_t at = r.find(m);
  if (at != std::string_view::npos) {
    // Whitespace before a call is dropped, unless the call turns out not to be one.
    size_t ws_start = trailing_ws_start(r, at);
    emit_content(r.substr(0, ws_start));
    consume(ws_start);
    mode = Mode::kCallOpen;
    return Progress::kMoved;
  }
  if (finishing) {
    emit_content(calls.empty() ? r : r.substr(0, trailing_ws_start(r, r.size())));
    consume(r.size());
    mode = Mode::kFinished;
    return Progress::kMoved;
  }
  size_t cut = r.size() - partial_marker_suffix(r, m);
  cut = trailing_ws_start(r, cut);
  emit_content(r.substr(0, cut));
  consume(cut);
  return Progress::kNeedMore;
}

Progress OutputParser::State::step_after_call() {
  std::string_view r = rest();
  size_t skip = 0;
  bool llama = format.tools == ToolFormat::kLlama3Json;
  while (skip < r.size() && (is_ws(r[skip]) || (llama && r[skip] == ';'))) ++skip;
  consume(skip);
  r = rest();
  if (r.empty()) {
    if (finishing) mode = Mode::kFinished;
    return finishing ? Progress::kMoved : Progress::kNeedMore;
  }
  if (can_start_call() && llama && r[0] == '{') {
    mode = Mode::kCallOpen;
    return Progress::kMoved;
  }
  std::string_view m = marker();
  if (!finishing && r.size() < m.size() && m.substr(0, r.size()) == r) return Progress::kNeedMore;
  mode = Mode::kContent;
  return Progress::kMoved;
}

// ---- public API ----

OutputParser::OutputParser(ChatFormat format, bool starts_in_reasoning, bool split_reasoning, bool parse_tools,
                           std::vector<ToolSpec> tools)
    : state_(std::make_unique<State>(std::move(format), starts_in_reasoning, split_reasoning, parse_tools,
                                     std::move(tools))) {}
OutputParser::~OutputParser() = default;
OutputParser::OutputParser(OutputParser&&) noexcept = default;
OutputParser& OutputParser::operator=(OutputParser&&) noexcept = default;

OutputDelta OutputParser::push(std::string_view text) {
  State& s = *state_;
  if (s.mode == State::Mode::kFinished || s.finishing) return {};
  s.buf.append(text);
  s.run();
  return std::exchange(s.out, {});
}

OutputDelta OutputParser::finish() {
  State& s = *state_;
  if (s.finishing) return {};
  s.finishing = true;
  s.run();
  s.mode = State::Mode::kFinished;
  return std::exchange(s.out, {});
}

const std::string& OutputParser::reasoning() const { return state_->reasoning; }
const std::string& OutputParser::content() const { return state_->content; }
const std::vector<ToolCall>& OutputParser::tool_calls() const { return state_->calls; }
void OutputParser::set_call_id_seed(uint64_t seed) { state_->rng.seed(seed); }

}  // namespace strata::chat
