// One assistant turn, whatever wire format asked for it: the conversation is rendered with the chat
// template, the output constraint (tool-call, JSON schema or GBNF grammar) is compiled, the prompt is
// tokenized and submitted, and the generated text comes back as events (reasoning, content and
// tool-call deltas, then the finish with its reason and usage). Each wire format (openai_api,
// anthropic_api, responses_api) only translates its request into a TurnRequest and the events into
// its own responses.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_format.h"
#include "server/request_fields.h"
#include "server/scheduler.h"
#include "text/chat_template.h"

namespace strata::server {

// What the server decides for every turn (its flags, its template, the engine).
struct TurnSetup {
  runtime::Engine* engine = nullptr;
  Scheduler* scheduler = nullptr;
  const text::ChatTemplate* chat_template = nullptr;
  chat::ChatFormat format;
  bool split_reasoning = true;          // --reasoning-format deepseek|auto; none keeps the tags in content
  nlohmann::json template_kwargs = nlohmann::json::object();  // --chat-template-kwargs, and enable_thinking
  int32_t n_predict = -1;               // -n: max tokens when a request sets none
  bool cache_prompt = true;             // --cache-prompt: a request's default
  int32_t reasoning_budget = -1;        // --reasoning-budget: thinking tokens before they are closed
  std::string reasoning_budget_message;  // --reasoning-budget-message: written before the close tag
};

// A request, translated from its wire format. Field names in errors are the wire format's.
struct TurnRequest {
  bool chat = true;
  std::vector<text::ChatMessage> messages;  // chat
  std::string prompt;                       // a raw completion (no template, no parsing)
  // Tools in OpenAI chat's shape ([{type: "function", function: {name, description, parameters}}]),
  // which is what chat templates read.
  nlohmann::json tools = nlohmann::json::array();
  std::string tools_field = "tools";
  nlohmann::json tool_choice = "auto";  // OpenAI chat's shape: "auto" | "none" | "required" | {function: {name}}
  std::string tool_choice_field = "tool_choice";
  bool parallel_tool_calls = true;
  nlohmann::json template_kwargs = nlohmann::json::object();  // merged over the server's
  // At most one output constraint; the field name is the one the wire format read it from.
  std::string grammar;  // GBNF text
  std::optional<nlohmann::json> json_schema;
  bool json_object = false;
  std::string constraint_field;
  // Stop strings matched here rather than in the generation, to say which one ended the turn.
  bool report_stop_sequence = false;
  std::optional<bool> cache_prompt;  // llama-server's field; unset: the server's default
  // Tokens of reasoning before it is closed (Anthropic's thinking.budget_tokens); unset: the
  // server's --reasoning-budget.
  std::optional<int32_t> reasoning_budget;
  GenerationParams generation;  // prompt tokens are filled in by the turn
};

struct TurnUsage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens a slot's cache already held
  nlohmann::json timings;     // llama-server's "timings" (set when the turn is done)
};

// What one poll of a running turn produced. `done` comes once, with the finish.
struct TurnEvents {
  std::string reasoning;
  std::string content;
  std::vector<chat::ToolCallDelta> tool_calls;
  std::vector<TokenLogprob> logprobs;
  bool done = false;
  std::string finish_reason;   // "stop", "length" or "tool_calls"
  std::string stop_sequence;   // the stop string that ended the turn (report_stop_sequence)
  std::optional<ApiError> error;  // the generation failed
  TurnUsage usage;             // set when done
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty() && logprobs.empty() && !done; }
};

// The whole turn, for non-streamed answers.
struct TurnResult {
  std::string reasoning;
  std::string content;
  std::vector<chat::ToolCall> tool_calls;
  std::vector<TokenLogprob> logprobs;
  std::string finish_reason;
  std::string stop_sequence;
  TurnUsage usage;
};

class ChatTurn {
 public:
  // Renders, compiles the constraint, tokenizes and submits. Null with `error` set (naming the
  // request's field) when the request cannot run.
  static std::unique_ptr<ChatTurn> start(const TurnSetup& setup, TurnRequest request, ApiError& error);
  ~ChatTurn();

  // Waits up to `timeout` for output; returns what arrived (possibly nothing).
  TurnEvents poll(std::chrono::milliseconds timeout);
  void cancel();
  // The parser's totals, for a non-streamed answer once poll() said done.
  TurnResult result(const TurnEvents& last) const;
  bool tools_enabled() const { return parse_tools_; }
  TurnUsage usage() const;  // so far

 private:
  ChatTurn(std::shared_ptr<Request> job, chat::OutputParser parser, TurnRequest request, bool parse_tools);
  std::string match_stops(std::string text, bool done, std::string& matched);

  std::shared_ptr<Request> job_;
  chat::OutputParser parser_;
  TurnRequest request_;
  bool parse_tools_;
  std::string held_;  // text that may start a stop string (report_stop_sequence)
  std::string utf8_tail_[2];  // reasoning and content bytes held until their character is whole
  std::vector<TokenLogprob> logprobs_;
  bool finished_ = false;
};

// The prompt's token count as a turn would render it (Anthropic's count_tokens); nothing with `error`
// set when the request cannot be rendered.
std::optional<int32_t> count_prompt_tokens(const TurnSetup& setup, TurnRequest request, ApiError& error);

// Appends `piece` to `tail` and returns the text up to the last whole UTF-8 character, keeping an
// unfinished one in `tail` (nothing is kept when `flush`): streamed deltas never split a character.
std::string take_whole_utf8(std::string& tail, std::string piece, bool flush);

// How a server error is reported: a node down or the server stopping is 503 (retry); other codes keep
// `otherwise`.
ApiError engine_error(ErrorCode code, std::string message, int otherwise);

}  // namespace strata::server
