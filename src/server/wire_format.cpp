#include "server/wire_format.h"

namespace strata::server {

using nlohmann::json;

std::string sse_data(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string sse_event(const std::string& name, const json& j) {
  return "event: " + name + "\n" + sse_data(j);
}

}  // namespace strata::server
