// What every wire format shares when it reads a request body: the error type (OpenAI's shape by
// default; each format words its own body), readers of optional typed fields that name the field,
// and the fields every format takes (sampling, llama-server's extensions, chat_template_kwargs).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "sampling/sampler.h"

namespace strata::server {

struct TurnRequest;  // chat_turn.h, which includes this header for ApiError

// An API error with its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, when there is one
  std::string code;
  nlohmann::json body() const;  // OpenAI's {"error": {message, type, param, code}}
};

ApiError bad_field(const std::string& param, const std::string& message);

inline constexpr size_t kMaxJsonDepth = 64;
// Deepest nesting of arrays and objects in JSON text (string contents skipped), without parsing it.
size_t json_nesting_depth(std::string_view text);
// Parses a request body that must be a JSON object of bounded depth.
std::optional<ApiError> parse_body(const std::string& body, nlohmann::json& out);

// The value of an optional field: nullptr when `key` is absent or null (or `j` is not an object).
const nlohmann::json* optional_field(const nlohmann::json& j, std::string_view key);
// The dotted name of a field inside `where`.
std::string field_name(const std::string& where, const std::string& key);

// Optional fields: absent or null leaves `out` alone; a wrong type or range is an error naming `key`
// (prefixed by `where.` when `where` is given).
std::optional<ApiError> read_number(const nlohmann::json& j, const char* key, double& out, double lo, double hi,
                                    const std::string& where = "");
template <typename T>
std::optional<ApiError> read_number_as(const nlohmann::json& j, const char* key, T& out, double lo, double hi,
                                       const std::string& where = "") {
  double d = static_cast<double>(out);
  if (auto e = read_number(j, key, d, lo, hi, where)) return e;
  if constexpr (std::is_integral_v<T>) {
    if (const nlohmann::json* v = optional_field(j, key); v && !v->is_number_integer()) {
      const std::string name = field_name(where, key);
      return bad_field(name, "'" + name + "' must be an integer");
    }
  }
  out = static_cast<T>(d);
  return std::nullopt;
}
std::optional<ApiError> read_bool(const nlohmann::json& j, const char* key, bool& out, const std::string& where = "");
std::optional<ApiError> read_string(const nlohmann::json& j, const char* key, std::string& out,
                                    const std::string& where = "");
// A required string field.
std::optional<ApiError> need_string(const nlohmann::json& j, const char* key, std::string& out,
                                    const std::string& where = "");

// llama-server's chat_template_kwargs object (e.g. {"enable_thinking": false}).
std::optional<ApiError> parse_template_kwargs(const nlohmann::json& j, TurnRequest& turn);
// llama-server's extensions every format takes: ignore_eos, cache_prompt.
std::optional<ApiError> parse_server_extras(const nlohmann::json& j, TurnRequest& turn);
// OpenAI chat's function tool, the shape TurnRequest::tools holds (and chat templates read):
// {"type": "function", "function": {"name", "description", "parameters"}}.
nlohmann::json function_tool(const std::string& name, const std::string& description,
                             const nlohmann::json& parameters);
// OpenAI chat's tool_choice naming one function: {"type": "function", "function": {"name"}}.
nlohmann::json function_tool_choice(const std::string& name);
// A flat tool definition {name, description, <schema_key>} (Anthropic's and the Responses API's
// tools) appended to `tools` as a function tool. An absent or null schema is an error when
// `schema_required`, else {}.
std::optional<ApiError> read_flat_tool(const nlohmann::json& t, const std::string& at, const char* schema_key,
                                       bool schema_required, nlohmann::json& tools);
// What a request that sets no sampling field gets: OpenAI's defaults, which are Anthropic's too.
void set_api_sampling_defaults(sampling::Params& s);
// The defaults above, then the sampling fields under OpenAI's names: temperature, top_p, top_k,
// min_p, penalties, seed.
std::optional<ApiError> parse_sampling(const nlohmann::json& j, sampling::Params& s);

}  // namespace strata::server
