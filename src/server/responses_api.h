// OpenAI's Responses API (POST /v1/responses): input as a string or items (messages with
// input_text/output_text parts, function_call, function_call_output), instructions, flat function
// tools, tool_choice, max_output_tokens, text.format; answers as a response object with output items
// (reasoning, message, function_call) or as the documented event stream, each event numbered by
// sequence_number. Stored responses (previous_response_id) are not kept.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "server/wire_format.h"

namespace strata::server {

class OpenAiResponses : public WireFormat {
 public:
  std::optional<ApiError> parse(const nlohmann::json& body, TurnRequest& turn) override;
  nlohmann::json response(const TurnResult& result) override;
  std::string stream_start(const TurnUsage& at_start) override;
  std::string stream_events(const TurnEvents& ev) override;
  std::string stream_error(const ApiError& e) override;
  const char* id_prefix() const override { return "resp_"; }

 private:
  enum class Item { kNone, kReasoning, kMessage, kFunctionCall };
  // The response object with `output` and the status it has.
  nlohmann::json response_object(const nlohmann::json& output, const std::string& status,
                                 const TurnUsage* usage, const std::string& finish_reason) const;
  std::string event(const std::string& type, nlohmann::json body);
  std::string open_item(Item kind, nlohmann::json item);
  std::string close_item();
  std::string item_id(const char* prefix) const;

  nlohmann::json echo_ = nlohmann::json::object();  // request fields the response repeats
  int64_t sequence_ = 0;
  Item item_ = Item::kNone;
  nlohmann::json item_json_;      // the open item as it stands
  int32_t output_index_ = -1;
  int32_t tool_index_ = -1;
  nlohmann::json output_ = nlohmann::json::array();  // closed items
};

}  // namespace strata::server
