// Typing Qwen XML parameter values: the template writes strings raw and other values as JSON (or as
// Python's str(), so True/False/None appear too).
#include <set>

#include "chat/output_state.h"

namespace strata::chat {

namespace {

using nlohmann::json;

void add_types(const json& schema, std::set<std::string>* types, int depth) {
  if (!schema.is_object() || depth > 8) return;
  if (auto t = schema.find("type"); t != schema.end()) {
    if (t->is_string()) types->insert(t->get<std::string>());
    if (t->is_array()) {
      for (const auto& item : *t) {
        if (item.is_string()) types->insert(item.get<std::string>());
      }
    }
  }
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    for (const auto& v : *e) {
      types->insert(v.is_string() ? "string" : v.is_boolean() ? "boolean" : v.is_number() ? "number"
                    : v.is_null() ? "null" : v.is_array() ? "array" : "object");
    }
  }
  if (auto c = schema.find("const"); c != schema.end() && c->is_string()) types->insert("string");
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    if (auto list = schema.find(key); list != schema.end() && list->is_array()) {
      for (const auto& s : *list) add_types(s, types, depth + 1);
    }
  }
  if (types->empty() && (schema.contains("properties") || schema.contains("additionalProperties"))) {
    types->insert("object");
  }
  if (types->empty() && schema.contains("items")) types->insert("array");
}

bool type_allows(const std::set<std::string>& types, const json& v) {
  if (v.is_boolean()) return types.count("boolean") > 0;
  if (v.is_null()) return types.count("null") > 0;
  if (v.is_number_integer() || v.is_number_unsigned()) return types.count("integer") || types.count("number");
  if (v.is_number()) return types.count("number") > 0;
  if (v.is_object()) return types.count("object") > 0;
  if (v.is_array()) return types.count("array") > 0;
  return false;
}

}  // namespace

std::string xml_value_to_json(std::string_view raw, const json* schema) {
  auto as_string = [&] { return json(std::string(raw)).dump(-1, ' ', false, json::error_handler_t::replace); };
  std::set<std::string> types;
  if (schema) add_types(*schema, &types, 0);
  if (types.empty() || (types.size() == 1 && types.count("string"))) return as_string();
  std::string_view text = raw;
  while (!text.empty() && (text.front() == ' ' || text.front() == '\n' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\t')) text.remove_suffix(1);
  json v;
  if (text == "True" || text == "False") {
    v = text == "True";
  } else if (text == "None") {
    v = nullptr;
  } else {
    v = json::parse(text, nullptr, false);
  }
  if (!v.is_discarded() && type_allows(types, v)) return v.dump(-1, ' ', false, json::error_handler_t::replace);
  return as_string();
}

}  // namespace strata::chat
