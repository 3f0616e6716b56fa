// The OpenAI-compatible wire format: request validation (every field's type and range, with errors
// that name the field) and response objects, for chat completions and completions.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "server/scheduler.h"
#include "text/chat_template.h"

namespace strata::server {

// An OpenAI-style error with its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, when there is one
  std::string code;
  nlohmann::json body() const;
};

struct ParsedRequest {
  bool chat = false;
  std::string model;
  std::vector<text::ChatMessage> messages;  // chat
  std::string prompt;                       // completions
  std::string tools_json;
  bool enable_thinking = true;
  bool stream = false;
  bool include_usage = false;
  std::optional<bool> cache_prompt;  // llama-server's field; unset: the server's --cache-prompt default
  GenerationParams generation;  // prompt tokens are filled in later, after templating
};

inline constexpr size_t kMaxJsonDepth = 64;
// Deepest nesting of arrays and objects in JSON text (string contents skipped), without parsing it.
size_t json_nesting_depth(std::string_view text);

// Parses and validates a /v1/chat/completions (chat = true) or /v1/completions body.
std::optional<ApiError> parse_request(const std::string& body, bool chat, ParsedRequest& out);

// Response bodies.
nlohmann::json completion_response(const ParsedRequest& req, const std::string& id, const std::string& model,
                                   const std::string& text, const std::vector<TokenLogprob>& logprobs,
                                   const std::string& finish_reason, int32_t n_prompt, int32_t n_completion,
                                   int32_t n_cached = 0);
nlohmann::json stream_chunk(const ParsedRequest& req, const std::string& id, const std::string& model,
                            const std::string& text, const std::vector<TokenLogprob>& logprobs,
                            const std::optional<std::string>& finish_reason, bool first);
// OpenAI's usage, with prompt_tokens_details.cached_tokens: the prompt tokens the slot's cache held.
nlohmann::json usage_json(int32_t n_prompt, int32_t n_completion, int32_t n_cached = 0);
// llama-server's "timings" of a finished request.
nlohmann::json timings_json(const Request& request);

}  // namespace strata::server
