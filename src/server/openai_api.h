// OpenAI's chat completions (/v1/chat/completions) and legacy completions (/v1/completions): request
// validation (every field's type and range, errors naming the field; tools, tool_choice,
// response_format and llama-server's grammar / json_schema / chat_template_kwargs) and the
// responses, streamed as chunks or whole.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "server/wire_format.h"

namespace strata::server {

class OpenAiCompletions : public WireFormat {
 public:
  explicit OpenAiCompletions(bool chat) : chat_(chat) {}

  std::optional<ApiError> parse(const nlohmann::json& body, TurnRequest& turn) override;
  nlohmann::json response(const TurnResult& result) override;
  std::string stream_events(const TurnEvents& ev) override;
  std::string stream_error(const ApiError& e) override;
  const char* id_prefix() const override { return chat_ ? "chatcmpl-" : "cmpl-"; }

  bool include_usage() const { return include_usage_; }

 private:
  nlohmann::json chunk(nlohmann::json delta_or_text, const std::vector<TokenLogprob>& logprobs,
                       const std::optional<std::string>& finish_reason) const;

  bool chat_;
  bool include_usage_ = false;
  int32_t top_logprobs_ = -1;
  bool first_chunk_ = true;
};

// Usage as OpenAI chat counts it, with prompt_tokens_details.cached_tokens.
nlohmann::json openai_usage(const TurnUsage& usage);
// Messages in OpenAI chat's shape.
std::optional<ApiError> parse_openai_messages(const nlohmann::json& msgs, const std::string& where,
                                              std::vector<text::ChatMessage>& out);

}  // namespace strata::server
