#include "server/request_fields.h"

#include <fmt/format.h>

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

}  // namespace strata::server
