// OutputParser's call bodies: JSON calls (Hermes inside <tool_call>, Llama bare or after
// <|python_tag|>) and Qwen XML calls (<function=NAME><parameter=P>VALUE</parameter></function>).
#include <algorithm>
#include <array>

#include "chat/output_state.h"

namespace strata::chat {

namespace {

using nlohmann::json;

constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";
constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxHeaderBytes = 2048;  // {"type": .., "name": .., "arguments": with its spacing

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
// `s` is shorter than `p` and could still grow into it.
bool may_become(std::string_view s, std::string_view p) { return s.size() < p.size() && starts_with(p, s); }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Matches the start of a JSON call whose name comes before its arguments:
// {"name": "f", "arguments": {   (also "parameters", and a leading "type": "function" pair).
// On a match, *args_at is the offset of the arguments' '{'.
Header match_json_header(std::string_view t, std::string* name, size_t* args_at) {
  size_t i = 0;
  auto ws = [&] { while (i < t.size() && i <= kMaxHeaderBytes && is_ws(t[i])) ++i; };
  auto quoted = [&](std::string* out) -> Header {  // a string without escapes
    if (i >= t.size()) return Header::kNeedMore;
    if (t[i] != '"') return Header::kNoMatch;
    size_t end = t.find('"', i + 1);
    std::string_view body = t.substr(i + 1, end == std::string_view::npos ? std::string_view::npos : end - i - 1);
    if (body.find('\\') != std::string_view::npos || body.size() > kMaxNameBytes) return Header::kNoMatch;
    if (end == std::string_view::npos) return Header::kNeedMore;
    *out = std::string(body);
    i = end + 1;
    return Header::kMatch;
  };
  if (t.empty()) return Header::kNeedMore;
  if (t[0] != '{') return Header::kNoMatch;
  ++i;
  name->clear();
  for (int pair = 0; pair < 3; ++pair) {
    std::string key, value;
    ws();
    if (i > kMaxHeaderBytes) return Header::kNoMatch;  // whitespace floods are not a call's start
    if (Header h = quoted(&key); h != Header::kMatch) return h;
    ws();
    if (i >= t.size()) return Header::kNeedMore;
    if (t[i++] != ':') return Header::kNoMatch;
    ws();
    if (key == "arguments" || key == "parameters") {
      if (i >= t.size()) return Header::kNeedMore;
      if (name->empty() || t[i] != '{') return Header::kNoMatch;
      *args_at = i;
      return Header::kMatch;
    }
    if (key != "name" && key != "type") return Header::kNoMatch;
    if (Header h = quoted(&value); h != Header::kMatch) return h;
    if (key == "type" && value != "function") return Header::kNoMatch;
    if (key == "name") {
      if (value.empty()) return Header::kNoMatch;
      *name = value;
    }
    ws();
    if (i >= t.size()) return Header::kNeedMore;
    if (t[i++] != ',') return Header::kNoMatch;
  }
  return Header::kNoMatch;
}

bool valid_xml_name(std::string_view s) {
  return !s.empty() && s.size() <= kMaxNameBytes && s.find_first_of("<>\n") == std::string_view::npos;
}

}  // namespace

namespace {

// {"name": .., "arguments"|"parameters": {..} or its JSON text}: the name and the arguments' text.
bool call_from_json(const json& j, std::string* name, std::string* args) {
  if (!j.is_object()) return false;
  auto n = j.find("name");
  if (n == j.end() || !n->is_string() || n->get_ref<const std::string&>().empty() ||
      n->get_ref<const std::string&>().size() > kMaxNameBytes) {
    return false;
  }
  *name = n->get<std::string>();
  *args = "{}";
  auto a = j.find("arguments");
  if (a == j.end()) a = j.find("parameters");
  if (a == j.end()) return true;
  json value = *a;
  if (value.is_string()) value = json::parse(value.get_ref<const std::string&>(), nullptr, false);
  if (!value.is_object()) return false;
  *args = dump(value);
  return true;
}

}  // namespace

// One call object, or an array of them (some models put parallel calls in one block).
bool OutputParser::State::json_call_complete(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return false;
  json list = j.is_array() ? j : json::array({j});
  if (list.empty() || list.size() > kMaxToolCalls - calls.size()) return false;
  std::vector<std::pair<std::string, std::string>> found(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    if (!call_from_json(list[i], &found[i].first, &found[i].second)) return false;
  }
  for (auto& [name, args] : found) {
    start_call(std::move(name));
    emit_arguments(args);
  }
  return true;
}

void OutputParser::State::break_call(std::string_view unread) {
  if (mode == Mode::kJsonArgs) {
    emit_arguments(args_scanner.release_closers());
  } else {
    emit_arguments(xml_keys.empty() ? "{}" : "}");
  }
  std::string again = std::string(unread) + std::string(rest());
  buf = std::move(again);
  pos = 0;
  mode = finishing && buf.empty() ? Mode::kFinished : Mode::kContent;
}

Progress OutputParser::State::step_call_open() {
  std::string_view r = rest();
  std::string_view m = marker();
  call_lead = leading_ws(r);
  bool has_marker = starts_with(r.substr(call_lead), m);
  size_t i = call_lead + (has_marker ? m.size() : 0);
  size_t gap = leading_ws(r.substr(i));
  i += gap;
  std::string_view body = r.substr(i);
  auto fail = [&] {
    if (has_marker) {
      emit_content(r.substr(0, call_lead + m.size()));
      consume(call_lead + m.size());
    }
    mode = Mode::kContent;
    return Progress::kMoved;
  };
  bool out_of_room = r.size() > kMaxHeldBytes || call_lead > kMaxHeldWhitespace || gap > kMaxHeldWhitespace;
  if (body.empty()) return finishing || out_of_room ? fail() : Progress::kNeedMore;
  if (body[0] == '{') {
    std::string name;
    size_t args_at = 0;
    Header h = match_json_header(body, &name, &args_at);
    if (h == Header::kMatch) {
      consume(i + args_at);
      start_call(std::move(name));
      args_scanner = JsonScanner();
      args_text.clear();
      args_released = 0;
      mode = Mode::kJsonArgs;
      return Progress::kMoved;
    }
    bool llama = format.tools == ToolFormat::kLlama3Json;
    if (h == Header::kNoMatch || finishing || out_of_room) {
      if (llama || !has_marker || gap > kMaxHeldWhitespace) return fail();
      mode = Mode::kJsonHeld;
      scan_from = 0;
      return Progress::kMoved;
    }
    return Progress::kNeedMore;
  }
  if (body[0] == '[' && has_marker && format.tools != ToolFormat::kLlama3Json && gap <= kMaxHeldWhitespace) {
    mode = Mode::kJsonHeld;  // an array of calls: parsed whole at </tool_call>
    scan_from = 0;
    return Progress::kMoved;
  }
  if (starts_with(body, kFunctionOpen)) {
    Header h = open_xml_call(body, i);
    if (h == Header::kMatch) return Progress::kMoved;
    return h == Header::kNoMatch || finishing || out_of_room ? fail() : Progress::kNeedMore;
  }
  if (may_become(body, kFunctionOpen) && !finishing && !out_of_room) return Progress::kNeedMore;
  return fail();
}

// body starts with "<function=" at offset `at` of rest(): commits the call once its name is read.
Header OutputParser::State::open_xml_call(std::string_view body, size_t at) {
  std::string_view after = body.substr(kFunctionOpen.size());
  size_t gt = after.find('>');
  std::string_view name = after.substr(0, gt);
  if (gt == std::string_view::npos) return name.empty() || valid_xml_name(name) ? Header::kNeedMore : Header::kNoMatch;
  if (!valid_xml_name(name)) return Header::kNoMatch;
  consume(at + kFunctionOpen.size() + gt + 1);
  start_call(std::string(name));
  xml_keys.clear();
  mode = Mode::kXmlBetween;
  return Header::kMatch;
}

Progress OutputParser::State::step_json_held() {
  std::string_view r = rest();
  std::string_view m = marker();
  size_t start = call_lead + m.size();
  // Only text that arrived since the last look can hold the closing marker.
  size_t from = std::max(start, scan_from >= kToolCallClose.size() ? scan_from - kToolCallClose.size() + 1 : 0);
  size_t close = r.find(kToolCallClose, from);
  scan_from = r.size();
  if (close == std::string_view::npos && !finishing && r.size() <= kMaxHeldBytes) return Progress::kNeedMore;
  std::string_view body = close == std::string_view::npos ? r.substr(start) : r.substr(start, close - start);
  if (json_call_complete(body)) {
    consume(close == std::string_view::npos ? r.size() : close + kToolCallClose.size());
    mode = Mode::kAfterCall;
    return Progress::kMoved;
  }
  // Not a call after all: the marker is content and what follows is read again.
  emit_content(r.substr(0, start));
  consume(start);
  mode = Mode::kContent;
  return Progress::kMoved;
}

Progress OutputParser::State::step_json_args() {
  std::string_view r = rest();
  size_t n = 0;
  JsonScanner::Step st = JsonScanner::Step::kMore;
  for (; n < r.size(); ++n) {
    if (call_bytes + n >= kMaxCallBytes) {
      st = JsonScanner::Step::kError;
      break;
    }
    st = args_scanner.feed(r[n]);
    if (st == JsonScanner::Step::kError || st == JsonScanner::Step::kEnd) break;
    args_text += r[n];
    if (st == JsonScanner::Step::kDone) {
      ++n;
      break;
    }
  }
  consume(n);
  call_bytes += n;
  size_t release = args_scanner.release_size();
  emit_arguments(std::string_view(args_text).substr(args_released, release - args_released));
  args_released = release;
  if (st == JsonScanner::Step::kDone) {
    tail_scanner = JsonScanner();
    for (char c : std::string_view("{\"a\":0")) (void)tail_scanner.feed(c);  // the call object, after its arguments
    mode = Mode::kJsonTail;
    return Progress::kMoved;
  }
  if (st == JsonScanner::Step::kError || st == JsonScanner::Step::kEnd || finishing) {
    std::string unread = args_text.substr(release);
    break_call(unread);
    return Progress::kMoved;
  }
  return Progress::kNeedMore;
}

Progress OutputParser::State::step_json_tail() {
  bool llama = format.tools == ToolFormat::kLlama3Json;
  std::string_view r = rest();
  if (mode == Mode::kJsonTail) {
    size_t n = 0;
    JsonScanner::Step st = JsonScanner::Step::kMore;
    for (; n < r.size() && call_bytes + n < kMaxCallBytes; ++n) {
      st = tail_scanner.feed(r[n]);
      if (st != JsonScanner::Step::kMore) break;
    }
    if (st == JsonScanner::Step::kDone) ++n;
    consume(n);
    call_bytes += n;
    if (st == JsonScanner::Step::kMore && n == r.size() && !finishing) return Progress::kNeedMore;
    // The object closed, or it cannot (the call is complete either way).
    mode = llama ? Mode::kAfterCall : Mode::kHermesClose;
    return Progress::kMoved;
  }
  size_t ws = leading_ws(r);
  std::string_view after = r.substr(ws);
  if (starts_with(after, kToolCallClose) && ws <= kMaxHeldWhitespace) {
    consume(ws + kToolCallClose.size());
  } else if ((after.empty() || may_become(after, kToolCallClose)) && ws <= kMaxHeldWhitespace && !finishing) {
    return Progress::kNeedMore;
  }
  mode = Mode::kAfterCall;
  return Progress::kMoved;
}

void OutputParser::State::xml_add_parameter(std::string_view name, std::string_view raw) {
  // The template writes "<parameter=P>\n" VALUE "\n</parameter>": take those newlines back off.
  if (starts_with(raw, "\n")) raw.remove_prefix(1);
  if (!raw.empty() && raw.back() == '\n') raw.remove_suffix(1);
  std::string key(name);
  if (!xml_keys.insert(key).second) return;  // a repeated parameter: the first one stands
  const json* schema = nullptr;
  for (const auto& t : tools) {
    if (t.name != calls.back().name || !t.parameters.is_object()) continue;
    auto props = t.parameters.find("properties");
    if (props != t.parameters.end() && props->is_object()) {
      auto p = props->find(key);
      if (p != props->end()) schema = &*p;
    }
  }
  std::string piece = xml_keys.size() == 1 ? "{" : ",";
  piece += dump(json(key)) + ":" + xml_value_to_json(raw, schema);
  emit_arguments(piece);
}

void OutputParser::State::xml_finish_call() {
  emit_arguments(xml_keys.empty() ? "{}" : "}");
  mode = Mode::kXmlAfterFunction;
}

Progress OutputParser::State::step_xml_between() {
  std::string_view r = rest();
  size_t ws = skip_ws(r);
  consume(ws);
  call_bytes += ws;
  r = rest();
  const bool between = mode == Mode::kXmlBetween;
  if (between && starts_with(r, kParameterOpen)) {
    consume(kParameterOpen.size());
    mode = Mode::kXmlParamName;
    return Progress::kMoved;
  }
  if (between && starts_with(r, kFunctionClose)) {
    consume(kFunctionClose.size());
    xml_finish_call();
    return Progress::kMoved;
  }
  if (starts_with(r, kToolCallClose)) {
    consume(kToolCallClose.size());
    if (between) xml_finish_call();
    mode = Mode::kAfterCall;
    return Progress::kMoved;
  }
  bool maybe = r.empty() || may_become(r, kToolCallClose) ||
               (between && (may_become(r, kParameterOpen) || may_become(r, kFunctionClose)));
  if (maybe && !finishing) return Progress::kNeedMore;
  if (between) xml_finish_call();
  mode = r.empty() ? Mode::kAfterCall : Mode::kContent;  // anything else is content again
  return Progress::kMoved;
}

Progress OutputParser::State::step_xml_param_name() {
  std::string_view r = rest();
  size_t gt = r.find('>');
  std::string_view name = r.substr(0, gt);
  bool bad = !name.empty() && !valid_xml_name(name);
  if (gt == std::string_view::npos && !bad && !finishing) return Progress::kNeedMore;
  if (gt == std::string_view::npos || !valid_xml_name(name)) {
    break_call("");
    return Progress::kMoved;
  }
  xml_param = std::string(name);
  scan_from = 0;
  consume(gt + 1);
  call_bytes += gt + 1;
  mode = Mode::kXmlValue;
  return Progress::kMoved;
}

// The value runs to </parameter> (or, when that is missing, </function> or </tool_call>).
Progress OutputParser::State::step_xml_value() {
  std::string_view r = rest();
  size_t end = std::string_view::npos;
  bool own_close = false;
  for (std::string_view m : {kParameterClose, kFunctionClose, kToolCallClose}) {
    size_t at = r.find(m, scan_from >= m.size() ? scan_from - m.size() + 1 : 0);
    if (at < end) {
      end = at;
      own_close = m == kParameterClose;
    }
  }
  if (end == std::string_view::npos) {
    scan_from = r.size();
    if (finishing) end = r.size();
    else if (call_bytes + r.size() > kMaxCallBytes) return break_call(""), Progress::kMoved;
    else return Progress::kNeedMore;
  }
  xml_add_parameter(xml_param, r.substr(0, end));
  size_t used = end + (own_close ? kParameterClose.size() : 0);
  consume(used);
  call_bytes += used;
  mode = Mode::kXmlBetween;
  return Progress::kMoved;
}

}  // namespace strata::chat
