#include "server/chat_turn.h"

#include <fmt/format.h>

#include <algorithm>
#include <semaphore>

#include "base/checked.h"
#include "grammar/grammar.h"

namespace strata::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxGrammarBytes = 1 << 20;

// A prompt that cannot fit the context however it tokenizes is refused before it is tokenized.
std::optional<ApiError> check_prompt_size(const text::Vocab& vocab, const std::string& prompt, int32_t n_ctx) {
  const size_t per_token = vocab.max_bytes_per_token();
  if (per_token == 0 || prompt.size() <= sat_mul(uint64_t(n_ctx), per_token)) return std::nullopt;
  ApiError e;
  e.code = "context_length_exceeded";
  e.message = fmt::format("the prompt has {} bytes, more than a slot's context of {} tokens can hold", prompt.size(), n_ctx);
  return e;
}

// Prompts over 1 MiB are tokenized one at a time: tokenizing costs memory in proportion to the text.
class BigPromptTurn {
 public:
  explicit BigPromptTurn(size_t bytes) : big_(bytes > (size_t{1} << 20)) {
    if (big_) got_ = turn().try_acquire_for(std::chrono::seconds(30));
  }
  ~BigPromptTurn() {
    if (got_) turn().release();
  }
  bool ok() const { return !big_ || got_; }

 private:
  static std::binary_semaphore& turn() {
    static std::binary_semaphore s(1);
    return s;
  }
  bool big_;
  bool got_ = false;
};

// llama-server's "timings" of a finished request.
json timings_json(const Request& r) {
  const int32_t computed = r.n_prompt() - r.n_cached();
  const double prompt_ms = r.prompt_ms(), predicted_ms = r.predicted_ms();
  // The first token closes the prompt's time; the others are the generation's.
  const int32_t predicted = std::max(0, r.n_generated() - 1);
  json t = {{"cache_n", r.n_cached()},
            {"prompt_n", computed},
            {"prompt_ms", prompt_ms},
            {"prompt_per_second", prompt_ms > 0 ? computed * 1000.0 / prompt_ms : 0.0},
            {"predicted_n", r.n_generated()},
            {"predicted_ms", predicted_ms},
            {"predicted_per_second", predicted_ms > 0 ? predicted * 1000.0 / predicted_ms : 0.0}};
  if (r.speculative()) {  // as llama-server with a --spec-type
    t["draft_n"] = r.draft_n();
    t["draft_n_accepted"] = r.draft_n_accepted();
  }
  return t;
}

// What the parse of tools and tool_choice decided.
struct ToolPlan {
  std::vector<chat::ToolSpec> specs;
  chat::ToolChoice choice{chat::ToolChoice::kAuto, ""};
  bool render_tools = false;  // the template sees the tools
  bool parse_calls = false;   // the output is searched for calls
  bool force_call = false;    // a grammar makes a call certain
  bool generic = false;       // the template has no call format: llama-server's generic JSON one
};

std::optional<ApiError> plan_tools(const TurnSetup& setup, const TurnRequest& req, ToolPlan& plan) {
  if (!req.tools.is_array()) return bad_field(req.tools_field, "'" + req.tools_field + "' must be an array");
  auto specs = chat::parse_tools(req.tools);
  if (!specs.ok()) return bad_field(req.tools_field, req.tools_field + ": " + specs.error().message);
  plan.specs = std::move(*specs);
  auto choice = chat::parse_tool_choice(req.tool_choice, plan.specs);
  if (!choice.ok()) return bad_field(req.tool_choice_field, req.tool_choice_field + ": " + choice.error().message);
  plan.choice = *choice;
  const bool any = !plan.specs.empty() && plan.choice.kind != chat::ToolChoice::kNone;
  plan.generic = any && setup.format.tools == chat::ToolFormat::kNone;
  plan.render_tools = any && !plan.generic;  // the generic format describes them in the system prompt
  plan.parse_calls = any;
  plan.force_call = any && (plan.choice.kind == chat::ToolChoice::kRequired ||
                            plan.choice.kind == chat::ToolChoice::kFunction);
  return std::nullopt;
}

// The request's template variables over the server's; enable_thinking comes from the result.
json merged_kwargs(const TurnSetup& setup, const TurnRequest& req) {
  json kwargs = setup.template_kwargs.is_object() ? setup.template_kwargs : json::object();
  if (req.template_kwargs.is_object()) {
    for (auto it = req.template_kwargs.begin(); it != req.template_kwargs.end(); ++it) kwargs[it.key()] = it.value();
  }
  return kwargs;
}

bool thinking_enabled(const json& kwargs) {
  return !kwargs.contains("enable_thinking") || !kwargs["enable_thinking"].is_boolean() ||
         kwargs["enable_thinking"].get<bool>();
}

// Adds `text` to the system prompt: after the first message's text when that is a system message,
// else as a system message of its own before the others.
void add_system_text(std::vector<text::ChatMessage>& messages, const std::string& text) {
  if (!messages.empty() && messages[0].role == "system") {
    messages[0].content += (messages[0].content.empty() ? "" : "\n\n") + text;
    return;
  }
  text::ChatMessage system;
  system.role = "system";
  system.content = text;
  messages.insert(messages.begin(), std::move(system));
}

// Whether every system note after the first message shows in the rendered prompt: templates that
// allow a system message only first either refuse the others or drop them without a word (Qwen3.5 and
// 3.6 render no branch for them).
bool notes_rendered(const std::vector<text::ChatMessage>& messages, const std::string& prompt) {
  for (size_t i = 1; i < messages.size(); ++i) {
    if (messages[i].role == "system" && prompt.find(messages[i].content) == std::string::npos) return false;
  }
  return true;
}

// Current clients send system notes mid-conversation. A template that refuses or drops them gets
// them merged into the leading system prompt, in order. False when there is nothing to merge.
bool merge_system_notes(std::vector<text::ChatMessage>& messages) {
  std::vector<text::ChatMessage> kept;
  std::string notes;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i > 0 && messages[i].role == "system") {
      notes += (notes.empty() ? "" : "\n\n") + messages[i].content;
    } else {
      kept.push_back(std::move(messages[i]));
    }
  }
  const bool merged = kept.size() < messages.size();
  messages = std::move(kept);
  if (merged) add_system_text(messages, notes);
  return merged;
}

// Renders the conversation; `starts_in_reasoning` says the prompt ends inside an open think tag.
// `conversation` (when the engine keeps state checkpoints) is the chat without its generation prompt.
std::optional<ApiError> render_prompt(const TurnSetup& setup, const TurnRequest& req, const ToolPlan& tools,
                                      std::string& prompt, bool& starts_in_reasoning, std::string* conversation) {
  starts_in_reasoning = false;
  if (!req.chat) {
    prompt = req.prompt;
    return std::nullopt;
  }
  const json kwargs = merged_kwargs(setup, req);
  text::ChatRenderOptions o;
  o.add_generation_prompt = true;
  o.enable_thinking = thinking_enabled(kwargs);
  if (tools.render_tools) o.tools_json = req.tools.dump();
  if (!kwargs.empty()) o.kwargs_json = kwargs.dump();
  std::vector<text::ChatMessage> messages = req.messages;
  if (tools.generic) add_system_text(messages, chat::generic_tools_instruction(tools.specs, req.parallel_tool_calls));
  auto rendered = setup.chat_template->render(messages, o);
  if ((!rendered.ok() || !notes_rendered(messages, *rendered)) && merge_system_notes(messages)) {
    rendered = setup.chat_template->render(messages, o);
  }
  if (!rendered.ok()) return bad_field("", "cannot apply the chat template: " + rendered.error().message);
  prompt = std::move(*rendered);
  if (conversation && setup.engine->needs_checkpoints()) {
    o.add_generation_prompt = false;
    if (auto without = setup.chat_template->render(messages, o); without.ok()) *conversation = std::move(*without);
  }
  starts_in_reasoning = setup.format.thinking && chat::prompt_opens_reasoning(setup.format, prompt);
  return std::nullopt;
}

// GBNF text for the request's constraint, or empty for none.
std::optional<ApiError> constraint_gbnf(const TurnSetup& setup, const TurnRequest& req, const ToolPlan& tools,
                                        bool starts_in_reasoning, std::string& gbnf) {
  const int n_constraints = int(!req.grammar.empty()) + int(req.json_schema.has_value()) + int(req.json_object);
  if (n_constraints > 1) {
    return bad_field(req.constraint_field, "give one of a grammar, a JSON schema or a JSON object format, not several");
  }
  if (n_constraints == 1 && (tools.force_call || tools.generic)) {
    return bad_field(req.constraint_field, "'" + req.constraint_field +
                                               (tools.generic ? "' cannot be combined with tools on a model whose "
                                                                "template has no tool-call format"
                                                              : "' cannot be combined with a required tool call"));
  }
  const std::string& field = req.constraint_field;
  // With thinking off the template has closed the think block: the constrained text comes at once.
  // With it on, the grammar lets the model reason (bounded) and close the block first.
  chat::ChatFormat format = setup.format;
  if (!thinking_enabled(merged_kwargs(setup, req))) format.thinking = false;
  if (tools.force_call || tools.generic) {
    auto g = tools.generic
                 ? chat::generic_tool_grammar(format, tools.specs, tools.choice, req.parallel_tool_calls, starts_in_reasoning)
                 : chat::tool_call_grammar(format, tools.specs, tools.choice, req.parallel_tool_calls, starts_in_reasoning);
    if (!g.ok()) return bad_field(req.tool_choice_field, req.tool_choice_field + ": " + g.error().message);
    gbnf = std::move(*g);
  } else if (req.json_schema || req.json_object) {
    const nlohmann::json schema = req.json_schema ? *req.json_schema : nlohmann::json{{"type", "object"}};
    auto g = grammar::json_schema_to_gbnf(schema, "answer-");
    if (!g.ok()) return bad_field(field, field + ": " + g.error().message);
    gbnf = req.chat ? chat::reasoning_then(format, starts_in_reasoning, "answer-root", *g) : *g;
    if (!req.chat) gbnf = "root ::= answer-root\n" + gbnf;
  } else if (!req.grammar.empty()) {
    if (req.grammar.size() > kMaxGrammarBytes) return bad_field(field, field + ": the grammar is over 1 MiB");
    gbnf = req.grammar;
  }
  return std::nullopt;
}

std::optional<ApiError> compile_constraint(const std::string& gbnf, const std::string& field, GenerationParams& g) {
  if (gbnf.empty()) return std::nullopt;
  auto parsed = grammar::parse_gbnf(gbnf);
  if (!parsed.ok()) return bad_field(field, field + ": " + parsed.error().message);
  g.grammar = std::move(*parsed);
  return std::nullopt;
}

std::optional<ApiError> tokenize(const TurnSetup& setup, const std::string& prompt, GenerationParams& g) {
  const text::Vocab& vocab = setup.engine->vocab();
  if (auto e = check_prompt_size(vocab, prompt, setup.engine->n_ctx_per_seq())) return e;
  BigPromptTurn turn(prompt.size());
  if (!turn.ok()) {
    ApiError e;
    e.status = 503;
    e.type = "unavailable_error";
    e.message = "the server is busy with other large prompts; try again";
    return e;
  }
  g.prompt = vocab.tokenize(prompt, true, true);
  return std::nullopt;
}

// The request's reasoning budget (else the server's) as the generation applies it.
void set_reasoning_budget(const TurnSetup& setup, const TurnRequest& req, bool starts_in_reasoning,
                          GenerationParams& g) {
  const int32_t tokens = req.reasoning_budget.value_or(setup.reasoning_budget);
  if (!req.chat || tokens < 0 || !setup.format.thinking) return;
  runtime::ReasoningBudgetParams& b = g.reasoning_budget;
  b.tokens = tokens;
  b.starts_inside = starts_in_reasoning;
  b.open = setup.format.think_open;
  b.close = setup.format.think_close;
  b.forced = setup.engine->vocab().tokenize(setup.reasoning_budget_message + b.close, false, true);
}

void append_delta(chat::OutputDelta& into, chat::OutputDelta more) {
  into.reasoning += more.reasoning;
  into.content += more.content;
  for (auto& d : more.tool_calls) into.tool_calls.push_back(std::move(d));
}

}  // namespace

std::string take_whole_utf8(std::string& tail, std::string piece, bool flush) {
  std::string s = std::move(tail);
  s += piece;
  tail.clear();
  if (flush || s.empty()) return s;
  size_t lead = s.size();
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const uint8_t b = static_cast<uint8_t>(s[s.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte
    if (b >= 0xC0) lead = s.size() - back;
    break;
  }
  if (lead == s.size()) return s;
  const uint8_t b = static_cast<uint8_t>(s[lead]);
  const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  if (s.size() - lead >= need) return s;
  tail = s.substr(lead);
  s.resize(lead);
  return s;
}

ApiError engine_error(ErrorCode code, std::string message, int otherwise) {
  ApiError e;
  e.message = std::move(message);
  e.status = otherwise;
  if (code == ErrorCode::kUnavailable) {
    e.status = 503;
    e.type = "unavailable_error";
  } else if (otherwise >= 500) {
    e.type = "server_error";
  }
  if (code == ErrorCode::kOutOfRange && otherwise < 500) e.code = "context_length_exceeded";
  return e;
}

std::unique_ptr<ChatTurn> ChatTurn::start(const TurnSetup& setup, TurnRequest req, ApiError& error) {
  auto fail = [&](ApiError e) {
    error = std::move(e);
    return nullptr;
  };
  ToolPlan tools;
  if (req.chat) {
    if (auto e = plan_tools(setup, req, tools)) return fail(*e);
  }
  std::string prompt, conversation, gbnf;
  bool starts_in_reasoning = false;
  if (auto e = render_prompt(setup, req, tools, prompt, starts_in_reasoning, &conversation)) return fail(*e);
  if (auto e = constraint_gbnf(setup, req, tools, starts_in_reasoning, gbnf)) return fail(*e);
  const std::string field = tools.force_call || tools.generic ? req.tool_choice_field : req.constraint_field;
  if (auto e = compile_constraint(gbnf, field, req.generation)) return fail(*e);
  if (auto e = tokenize(setup, prompt, req.generation)) return fail(*e);
  set_reasoning_budget(setup, req, starts_in_reasoning, req.generation);
  // -n is a request's default and, as in llama-server, its cap.
  if (setup.n_predict >= 0 && (req.generation.max_tokens < 0 || req.generation.max_tokens > setup.n_predict)) {
    req.generation.max_tokens = setup.n_predict;
  }
  GenerationParams params = req.generation;
  if (req.report_stop_sequence) params.stop.clear();  // matched by the turn
  CacheHints hints;
  hints.cache_prompt = req.cache_prompt.value_or(setup.cache_prompt);
  hints.boundary = cache_boundary(setup.engine->vocab(), params.prompt, conversation);
  auto submitted = setup.scheduler->submit(std::move(params), hints);
  if (!submitted.ok()) return fail(engine_error(submitted.error().code, submitted.error().message, 400));
  chat::ChatFormat format = req.chat ? setup.format : chat::ChatFormat{};
  if (tools.generic) format.tools = chat::ToolFormat::kGeneric;
  const bool split = req.chat && setup.split_reasoning;
  chat::OutputParser parser(format, starts_in_reasoning && split, split, tools.parse_calls, tools.specs);
  return std::unique_ptr<ChatTurn>(new ChatTurn(*submitted, std::move(parser), std::move(req), tools.parse_calls));
}

std::optional<int32_t> count_prompt_tokens(const TurnSetup& setup, TurnRequest req, ApiError& error) {
  ToolPlan tools;
  std::string prompt;
  bool starts_in_reasoning = false;
  std::optional<ApiError> e = req.chat ? plan_tools(setup, req, tools) : std::nullopt;
  if (!e) e = render_prompt(setup, req, tools, prompt, starts_in_reasoning, nullptr);
  if (!e) e = tokenize(setup, prompt, req.generation);
  if (e) {
    error = *e;
    return std::nullopt;
  }
  return static_cast<int32_t>(req.generation.prompt.size());
}

ChatTurn::ChatTurn(std::shared_ptr<Request> job, chat::OutputParser parser, TurnRequest request, bool parse_tools)
    : job_(std::move(job)), parser_(std::move(parser)), request_(std::move(request)), parse_tools_(parse_tools) {}

ChatTurn::~ChatTurn() {
  if (!finished_) job_->cancel();
}

void ChatTurn::cancel() { job_->cancel(); }

TurnUsage ChatTurn::usage() const {
  return {job_->n_prompt(), job_->n_generated(), job_->n_cached(), json()};
}

// Finds the first stop string in the held text plus `text`; returns the text before it (or all that
// cannot start a stop string) and sets `matched`.
std::string ChatTurn::match_stops(std::string text, bool done, std::string& matched) {
  std::string s = std::move(held_);
  s += text;
  held_.clear();
  size_t first = std::string::npos;
  for (const auto& stop : request_.generation.stop) {
    const size_t at = stop.empty() ? std::string::npos : s.find(stop);
    if (at < first) {
      first = at;
      matched = stop;
    }
  }
  if (first != std::string::npos) {
    s.resize(first);
    return s;
  }
  if (done) return s;
  size_t keep = 0;  // the longest tail of s that begins a stop string
  for (const auto& stop : request_.generation.stop) {
    for (size_t n = std::min(stop.size() - (stop.empty() ? 0 : 1), s.size()); n > keep; --n) {
      if (s.compare(s.size() - n, n, stop, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  held_ = s.substr(s.size() - keep);
  s.resize(s.size() - keep);
  return s;
}

TurnEvents ChatTurn::poll(std::chrono::milliseconds timeout) {
  TurnEvents ev;
  Request::Chunk c = job_->next(timeout);
  if (c.done && !c.error.empty()) {
    finished_ = true;
    ev.done = true;
    ev.error = engine_error(c.error_code, c.error, 500);
    return ev;
  }
  bool done = c.done;
  std::string text = std::move(c.text);
  if (request_.report_stop_sequence && !request_.generation.stop.empty()) {
    text = match_stops(std::move(text), done, ev.stop_sequence);
    if (!ev.stop_sequence.empty()) {
      job_->cancel();  // the turn ends here; the slot is freed
      done = true;
      c.finish_reason = "stop";
    }
  }
  chat::OutputDelta d = parser_.push(text);
  if (done) append_delta(d, parser_.finish());
  ev.reasoning = take_whole_utf8(utf8_tail_[0], std::move(d.reasoning), done);
  ev.content = take_whole_utf8(utf8_tail_[1], std::move(d.content), done);
  ev.tool_calls = std::move(d.tool_calls);
  ev.logprobs = std::move(c.logprobs);
  for (const auto& l : ev.logprobs) logprobs_.push_back(l);
  if (done) {
    finished_ = true;
    ev.done = true;
    ev.finish_reason = c.finish_reason;
    if (!parser_.tool_calls().empty() && ev.finish_reason == "stop") ev.finish_reason = "tool_calls";
    ev.usage = usage();
    ev.usage.timings = timings_json(*job_);
  }
  return ev;
}

TurnResult ChatTurn::result(const TurnEvents& last) const {
  TurnResult r;
  r.reasoning = parser_.reasoning();
  r.content = parser_.content();
  r.tool_calls = parser_.tool_calls();
  r.logprobs = logprobs_;
  r.finish_reason = last.finish_reason;
  r.stop_sequence = last.stop_sequence;
  r.usage = last.usage;
  return r;
}

}  // namespace strata::server
