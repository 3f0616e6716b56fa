#include "server/request_fields.h"

#include <fmt/format.h>

#include "server/chat_turn.h"

namespace strata::server {

using nlohmann::json;

json ApiError::body() const {
  return {{"error",
           {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

ApiError bad_field(const std::string& param, const std::string& message) {
  ApiError e;
  e.param = param;
  e.message = message;
  return e;
}

const json* optional_field(const json& j, std::string_view key) {
  const auto it = j.find(key);  // end() when j is not an object
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string field_name(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::optional<ApiError> parse_body(const std::string& body, json& out) {
  // The JSON parser, dump() and the template's values all recurse per level: refuse deep bodies first.
  if (json_nesting_depth(body) > kMaxJsonDepth) {
    return bad_field("", fmt::format("the request body nests arrays and objects deeper than {} levels", kMaxJsonDepth));
  }
  out = json::parse(body, nullptr, false);
  if (out.is_discarded()) return bad_field("", "the request body is not valid JSON");
  if (!out.is_object()) return bad_field("", "the request body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> read_number(const json& j, const char* key, double& out, double lo, double hi,
                                    const std::string& where) {
  const json* v = optional_field(j, key);
  if (!v) return std::nullopt;
  const std::string name = field_name(where, key);
  if (!v->is_number()) return bad_field(name, "'" + name + "' must be a number");
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) return bad_field(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
  out = d;
  return std::nullopt;
}

std::optional<ApiError> read_bool(const json& j, const char* key, bool& out, const std::string& where) {
  const json* v = optional_field(j, key);
  if (!v) return std::nullopt;
  const std::string name = field_name(where, key);
  if (!v->is_boolean()) return bad_field(name, "'" + name + "' must be a boolean");
  out = v->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_string(const json& j, const char* key, std::string& out, const std::string& where) {
  const json* v = optional_field(j, key);
  if (!v) return std::nullopt;
  const std::string name = field_name(where, key);
  if (!v->is_string()) return bad_field(name, "'" + name + "' must be a string");
  out = v->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> need_string(const json& j, const char* key, std::string& out, const std::string& where) {
  const std::string name = field_name(where, key);
  if (!optional_field(j, key)) return bad_field(name, "'" + name + "' is required");
  return read_string(j, key, out, where);
}

std::optional<ApiError> parse_server_extras(const json& j, TurnRequest& turn) {
  if (auto e = read_bool(j, "ignore_eos", turn.generation.ignore_eos)) return e;
  if (optional_field(j, "cache_prompt")) {
    bool cache = true;
    if (auto e = read_bool(j, "cache_prompt", cache)) return e;
    turn.cache_prompt = cache;
  }
  return std::nullopt;
}

std::optional<ApiError> parse_template_kwargs(const json& j, TurnRequest& turn) {
  const json* kwargs = optional_field(j, "chat_template_kwargs");
  if (!kwargs) return std::nullopt;
  const json& k = *kwargs;
  if (!k.is_object()) return bad_field("chat_template_kwargs", "'chat_template_kwargs' must be an object");
  bool thinking = true;
  if (auto e = read_bool(k, "enable_thinking", thinking, "chat_template_kwargs")) return e;
  for (auto it = k.begin(); it != k.end(); ++it) turn.template_kwargs[it.key()] = it.value();
  return std::nullopt;
}

json function_tool(const std::string& name, const std::string& description, const json& parameters) {
  return {{"type", "function"}, {"function", {{"name", name}, {"description", description}, {"parameters", parameters}}}};
}

json function_tool_choice(const std::string& name) {
  return {{"type", "function"}, {"function", {{"name", name}}}};
}

std::optional<ApiError> read_flat_tool(const json& t, const std::string& at, const char* schema_key,
                                       bool schema_required, json& tools) {
  std::string name, description;
  if (auto e = need_string(t, "name", name, at)) return e;
  if (auto e = read_string(t, "description", description, at)) return e;
  const json* schema = optional_field(t, schema_key);
  if (schema ? !schema->is_object() : schema_required) {
    const std::string field = field_name(at, schema_key);
    return bad_field(field, "'" + field + "' must be an object");
  }
  tools.push_back(function_tool(name, description, schema ? *schema : json::object()));
  return std::nullopt;
}

void set_api_sampling_defaults(sampling::Params& s) {
  s.temp = 1.0f;  // OpenAI's default; llama.cpp's 0.8 applies only to its own tools
  s.top_p = 1.0f;
  s.top_k = 0;
  s.min_p = 0.0f;
  s.seed = sampling::kRandomSeed;
}

std::optional<ApiError> parse_sampling(const json& j, sampling::Params& s) {
  set_api_sampling_defaults(s);
  if (auto e = read_number_as(j, "temperature", s.temp, 0, 2)) return e;
  if (auto e = read_number_as(j, "top_p", s.top_p, 0, 1)) return e;
  if (auto e = read_number_as(j, "top_k", s.top_k, 0, 1 << 20)) return e;
  if (auto e = read_number_as(j, "min_p", s.min_p, 0, 1)) return e;
  if (auto e = read_number_as(j, "presence_penalty", s.presence_penalty, -2, 2)) return e;
  if (auto e = read_number_as(j, "frequency_penalty", s.frequency_penalty, -2, 2)) return e;
  if (auto e = read_number_as(j, "repeat_penalty", s.repeat_penalty, 0.01, 10)) return e;
  int64_t seed = -1;
  if (auto e = read_number_as(j, "seed", seed, -1, 4294967295.0)) return e;
  s.seed = seed < 0 ? sampling::kRandomSeed : static_cast<uint32_t>(seed);
  return std::nullopt;
}

}  // namespace strata::server
