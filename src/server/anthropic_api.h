// Anthropic's Messages API (POST /v1/messages and /v1/messages/count_tokens): system text, messages of
// content blocks (text, tool_use, tool_result, thinking), tools with input_schema, tool_choice
// (auto/any/tool/none), stop_sequences, thinking; answers as a message with content blocks or as
// Anthropic's event stream (message_start, content_block_start/delta/stop, message_delta,
// message_stop), and errors in Anthropic's shape.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "server/wire_format.h"

namespace strata::server {

class AnthropicMessages : public WireFormat {
 public:
  std::optional<ApiError> parse(const nlohmann::json& body, TurnRequest& turn) override;
  nlohmann::json error_body(const ApiError& e) const override;
  nlohmann::json response(const TurnResult& result) override;
  std::string stream_start(const TurnUsage& at_start) override;
  std::string stream_events(const TurnEvents& ev) override;
  std::string stream_error(const ApiError& e) override;
  const char* id_prefix() const override { return "msg_"; }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  std::string open_block(Block kind, const nlohmann::json& content_block);
  std::string close_block();

  Block block_ = Block::kNone;
  int32_t block_index_ = -1;
  int32_t tool_index_ = -1;  // the tool call the open tool_use block holds
};

// Anthropic's stop_reason for a turn's finish.
std::string anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_sequence);

}  // namespace strata::server
