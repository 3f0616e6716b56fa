// The interface each wire format implements over a ChatTurn: read the request body into a TurnRequest,
// then word the turn's result (non-streamed) or its events (streamed, as server-sent events) and errors
// the way its clients expect. One object serves one request.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "server/chat_turn.h"

namespace strata::server {

class WireFormat {
 public:
  virtual ~WireFormat() = default;

  // Reads the parsed body; the error names the field.
  virtual std::optional<ApiError> parse(const nlohmann::json& body, TurnRequest& turn) = 0;
  // Called once the request is accepted, before any output.
  void set_served(std::string model_id, std::string response_id, int64_t created) {
    model_id_ = std::move(model_id);
    id_ = std::move(response_id);
    created_ = created;
  }

  const std::string& requested_model() const { return requested_model_; }
  bool stream() const { return stream_; }

  virtual nlohmann::json error_body(const ApiError& e) const { return e.body(); }
  virtual nlohmann::json response(const TurnResult& result) = 0;
  // Server-sent events: what opens the stream (with the prompt's usage), what one poll's events become (the closing events when
  // `ev.done`) and a failure mid-stream (the stream ends after it).
  virtual std::string stream_start(const TurnUsage& at_start) {
    (void)at_start;
    return "";
  }
  virtual std::string stream_events(const TurnEvents& ev) = 0;
  virtual std::string stream_error(const ApiError& e) = 0;
  // The id prefix of this format's responses ("chatcmpl-", "msg_", ...).
  virtual const char* id_prefix() const = 0;

 protected:
  std::string requested_model_;
  bool stream_ = false;
  std::string model_id_, id_;
  int64_t created_ = 0;
};

// "data: {json}\n\n", and with an event name "event: NAME\ndata: {json}\n\n".
std::string sse_data(const nlohmann::json& j);
std::string sse_event(const std::string& name, const nlohmann::json& j);

}  // namespace strata::server
