// JSON schema -> GBNF. Each schema node becomes an expression over shared primitive rules (string,
// number, ...) and rules named after the node's path. Whitespace between tokens is bounded (one
// space, or a newline and up to 8 indentation characters) and numbers have bounded digit counts, so
// every generated document ends. Objects list their properties in the schema's order (key order
// when the schema comes as a nlohmann::json, which keeps keys sorted); optional ones may be left out.
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

#include "base/checked.h"

namespace strata::grammar {

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (b < 0x20) out += fmt::format("\\x{:02X}", b);
    else out += c;
  }
  return out + "\"";
}

using json = nlohmann::ordered_json;

namespace {

constexpr int kMaxSchemaDepth = 64;
constexpr int64_t kMaxIntegerBound = 1000000000000000;  // 10^15: 16 digits at most
constexpr int64_t kMaxCount = 4096;                     // minItems/maxItems/minLength/maxLength
constexpr size_t kMaxKeyBytes = 1024;

const std::set<std::string>& known_keywords() {
  static const std::set<std::string> k = {
      "type", "properties", "required", "additionalProperties", "enum", "const", "items", "minItems",
      "maxItems", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "minLength", "maxLength",
      "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "description", "title",
      "$schema", "$id", "$comment", "default", "examples", "deprecated", "readOnly", "writeOnly", "nullable"};
  return k;
}

std::string literal(std::string_view bytes) { return gbnf_literal(bytes); }

std::string json_text(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string decimal(int64_t v) { return std::to_string(v); }

// GBNF for the decimal numbers of equal length n between lo and hi (digit strings).
std::string same_length(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 1) return fmt::format("[{}-{}]", lo[0], hi[0]);
  if (lo[0] == hi[0]) return fmt::format("\"{}\" ({})", lo[0], same_length(lo.substr(1), hi.substr(1)));
  const std::string zeros(n - 1, '0'), nines(n - 1, '9');
  if (lo.substr(1) == zeros && hi.substr(1) == nines) return fmt::format("[{}-{}] [0-9]{{{}}}", lo[0], hi[0], n - 1);
  std::string out = fmt::format("\"{}\" ({})", lo[0], same_length(lo.substr(1), nines));
  if (lo[0] + 1 <= hi[0] - 1) out += fmt::format(" | [{}-{}] [0-9]{{{}}}", char(lo[0] + 1), char(hi[0] - 1), n - 1);
  return out + fmt::format(" | \"{}\" ({})", hi[0], same_length(zeros, hi.substr(1)));
}

// Non-negative integers in [a, b]; b < 0: no upper bound (at most 16 digits).
std::string non_negative_range(int64_t a, int64_t b) {
  const std::string as = decimal(a);
  std::vector<std::string> alts;
  const size_t top_len = b < 0 ? as.size() : decimal(b).size();
  for (size_t len = as.size(); len <= top_len; ++len) {
    const std::string lo = len == as.size() ? as : "1" + std::string(len - 1, '0');
    const std::string hi = b >= 0 && len == top_len ? decimal(b) : std::string(len, '9');
    alts.push_back("(" + same_length(lo, hi) + ")");
  }
  if (b < 0 && as.size() < 16) alts.push_back(fmt::format("[1-9] [0-9]{{{},15}}", as.size()));
  std::string out;
  for (const auto& a2 : alts) out += (out.empty() ? "" : " | ") + a2;
  return out;
}

class Converter {
 public:
  Converter(const json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  Result<std::string> run() {
    for (char c : prefix_) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) {
        return make_error(ErrorCode::kInvalidArgument, "rule prefix '{}' may hold only letters, digits, '-' and '_'", prefix_);
      }
    }
    taken_.insert(prefix_ + "root");
    STRATA_ASSIGN(std::string expr, visit(root_, "root", "#", 0));
    define(prefix_ + "root", expr);
    std::string out;
    for (const auto& name : order_) out += name + " ::= " + bodies_[name] + "\n";
    return out;
  }

 private:
  Error fail(const std::string& path, const std::string& what) const {
    return make_error(ErrorCode::kInvalidArgument, "json schema at {}: {}", path, what);
  }

  void define(const std::string& name, const std::string& body) {
    if (!bodies_.count(name)) order_.push_back(name);
    bytes_ = sat_add(bytes_, name.size() + body.size() + 6);  // "name ::= body\n"
    bodies_[name] = body;
  }

  // A new rule named after `hint`, unique. Each base name remembers its last suffix, so N rules of one
  // base cost N probes, not N^2 (a schema's properties all share a "-rest" base).
  std::string rule(const std::string& hint, const std::string& body) {
    std::string base = prefix_;
    for (char c : hint) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    std::string name = base;
    for (int& i = next_suffix_[base]; taken_.count(name);) name = base + "-" + std::to_string(++i);
    taken_.insert(name);
    define(name, body);
    return name;
  }

  // The bounds checked as the conversion goes: each visit, each property, the text so far.
  std::optional<Error> over_budget(const std::string& path) const {
    if (nodes_ > kMaxSchemaNodes) return fail(path, fmt::format("more than {} schema nodes", kMaxSchemaNodes));
    if (properties_ > kMaxSchemaProperties) return fail(path, fmt::format("more than {} properties", kMaxSchemaProperties));
    if (bytes_ > kMaxGrammarBytes) return fail(path, fmt::format("the grammar would be over {} bytes", kMaxGrammarBytes));
    return std::nullopt;
  }

  std::string primitive(const std::string& what) {
    const std::string name = prefix_ + what;
    if (bodies_.count(name)) return name;
    static const std::map<std::string, std::string> bodies = {
        {"space", R"("" | " " | "\n" [ \t]{0,8})"},
        {"char", R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))"},
        {"plain-char", R"([^"\\\x00-\x1F])"},
        {"string", R"("\"" @char* "\"")"},
        {"number", R"("-"? @unsigned-number)"},
        {"unsigned-number", R"(("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?)"},
        {"integer", R"("-"? ("0" | [1-9] [0-9]{0,15}))"},
        {"boolean", R"("true" | "false")"},
        {"null", R"("null")"},
        {"value", R"(@object | @array | @string | @number | @boolean | @null)"},
        {"object", R"("{" @space (@string @space ":" @space @value @space ("," @space @string @space ":" @space @value @space)*)? "}")"},
        {"array", R"("[" @space (@value @space ("," @space @value @space)*)? "]")"},
        {"date", R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]))"},
        {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
        {"date-time", R"(@date "T" @time)"},
        {"uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
    };
    std::string body = bodies.at(what);
    define(name, "");  // reserved before the references below are resolved (recursion)
    taken_.insert(name);
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] != '@') {
        out += body[i];
        continue;
      }
      size_t j = i + 1;
      while (j < body.size() && (std::isalnum(static_cast<unsigned char>(body[j])) || body[j] == '-')) ++j;
      out += primitive(body.substr(i + 1, j - i - 1));
      i = j - 1;
    }
    define(name, out);
    return name;
  }

  Result<std::string> visit(const json& schema, const std::string& hint, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) return fail(path, fmt::format("nested deeper than {}", kMaxSchemaDepth));
    ++nodes_;
    if (auto e = over_budget(path)) return *e;
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return primitive("value");
      return fail(path, "schema false matches nothing");
    }
    if (!schema.is_object()) return fail(path, "a schema must be an object or a boolean");
    for (const auto& [key, unused] : schema.items()) {
      if (key == "pattern") return fail(path, "keyword 'pattern' is not supported");
      if (!known_keywords().count(key)) return fail(path, fmt::format("unsupported keyword '{}'", key));
    }
    if (schema.contains("$ref")) return visit_ref(schema["$ref"], path, depth);
    if (schema.contains("const")) return literal(json_text(schema["const"]));
    if (schema.contains("enum")) return visit_enum(schema["enum"], path);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (schema.contains(key)) return visit_alternatives(schema[key], hint, path + "/" + key, depth);
    }
    if (schema.contains("allOf")) return visit_all_of(schema, hint, path, depth);
    const json* type = schema.contains("type") ? &schema["type"] : nullptr;
    if (type == nullptr) return visit_type(implied_type(schema), schema, hint, path, depth);
    if (type->is_string()) return visit_type(type->get<std::string>(), schema, hint, path, depth);
    if (!type->is_array() || type->empty()) return fail(path, "'type' must be a string or a non-empty array");
    std::string out;
    for (const auto& t : *type) {
      if (!t.is_string()) return fail(path, "'type' entries must be strings");
      STRATA_ASSIGN(std::string e, visit_type(t.get<std::string>(), schema, hint, path, depth));
      out += (out.empty() ? "" : " | ") + ("(" + e + ")");
    }
    return rule(hint, out);
  }

  static std::string implied_type(const json& s) {
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) return "object";
    if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) return "array";
    if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) return "string";
    return "any";
  }

  Result<std::string> visit_type(const std::string& type, const json& s, const std::string& hint,
                                 const std::string& path, int depth) {
    if (type == "any") return primitive("value");
    if (type == "string") return visit_string(s, path);
    if (type == "number") return visit_number(s, path);
    if (type == "integer") return visit_integer(s, path);
    if (type == "boolean" || type == "null") return primitive(type);
    if (type == "object") return visit_object(s, hint, path, depth);
    if (type == "array") return visit_array(s, hint, path, depth);
    return fail(path, fmt::format("unknown type '{}'", type));
  }

  Result<std::string> visit_ref(const json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) return fail(path, "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    const json* node = nullptr;
    std::string name;
    if (target == "#") {
      node = &root_;
      name = "root-ref";
    }
    for (const char* section : {"#/$defs/", "#/definitions/"}) {
      const std::string head = section;
      if (target.rfind(head, 0) != 0) continue;
      name = target.substr(head.size());
      const std::string key = head.substr(2, head.size() - 3);
      if (root_.is_object() && root_.contains(key) && root_[key].is_object() && root_[key].contains(name)) {
        node = &root_[key][name];
      }
    }
    if (node == nullptr) return fail(path, fmt::format("$ref '{}' does not resolve (only #, #/$defs/NAME and #/definitions/NAME)", target));
    const std::string rule_name = rule("ref-" + name, "");
    refs_[target] = rule_name;  // before visiting: recursive schemas refer to it
    STRATA_ASSIGN(std::string body, visit(*node, "ref-" + name, target, depth + 1));
    define(rule_name, body);
    return rule_name;
  }

  Result<std::string> visit_enum(const json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) return fail(path, "'enum' must be a non-empty array");
    std::string out;
    for (const auto& v : values) out += (out.empty() ? "" : " | ") + literal(json_text(v));
    return "(" + out + ")";
  }

  Result<std::string> visit_alternatives(const json& list, const std::string& hint, const std::string& path, int depth) {
    if (!list.is_array() || list.empty()) return fail(path, "must be a non-empty array of schemas");
    std::string out;
    for (size_t i = 0; i < list.size(); ++i) {
      STRATA_ASSIGN(std::string e, visit(list[i], hint + "-" + std::to_string(i), path + "/" + std::to_string(i), depth + 1));
      out += (out.empty() ? "" : " | ") + ("(" + e + ")");
    }
    return rule(hint, out);
  }

  const json& resolved(const json& s) const {
    if (!s.is_object() || !s.contains("$ref") || !s["$ref"].is_string()) return s;
    const std::string target = s["$ref"].get<std::string>();
    for (const char* key : {"$defs", "definitions"}) {
      const std::string head = std::string("#/") + key + "/";
      if (target.rfind(head, 0) == 0 && root_.contains(key) && root_[key].contains(target.substr(head.size()))) {
        return root_[key][target.substr(head.size())];
      }
    }
    return s;
  }

  // allOf of object schemas: properties and required lists merged.
  Result<std::string> visit_all_of(const json& schema, const std::string& hint, const std::string& path, int depth) {
    const json& list = schema["allOf"];
    if (!list.is_array() || list.empty()) return fail(path + "/allOf", "must be a non-empty array of schemas");
    json merged = schema;
    merged.erase("allOf");
    if (list.size() == 1 && !schema.contains("properties")) {
      merged.update(resolved(list[0]));
      return visit(merged, hint, path, depth + 1);
    }
    merged["type"] = "object";
    for (size_t i = 0; i < list.size(); ++i) {
      const json& part = resolved(list[i]);
      const bool is_object = part.is_object() && (part.value("type", json("object")) == "object") &&
                             !part.contains("anyOf") && !part.contains("oneOf") && !part.contains("allOf");
      if (!is_object) return fail(path + "/allOf/" + std::to_string(i), "allOf is supported only over object schemas");
      const json part_props = part.value("properties", json::object());
      const json part_required = part.value("required", json::array());
      for (const auto& [k, v] : part_props.items()) merged["properties"][k] = v;
      for (const auto& r : part_required) merged["required"].push_back(r);
      if (part.contains("additionalProperties")) merged["additionalProperties"] = part["additionalProperties"];
    }
    return visit(merged, hint, path, depth + 1);
  }

  Result<int64_t> count(const json& s, const char* key, int64_t fallback, const std::string& path) {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return fail(path, fmt::format("'{}' must be a non-negative integer", key));
    if (v.get<int64_t>() > kMaxCount) return fail(path, fmt::format("'{}' {} is over the supported {}", key, v.get<int64_t>(), kMaxCount));
    return v.get<int64_t>();
  }

  Result<std::string> visit_string(const json& s, const std::string& path) {
    if (s.contains("format")) {
      const json& f = s["format"];
      const std::string format = f.is_string() ? f.get<std::string>() : "";
      if (format == "date" || format == "time" || format == "date-time" || format == "uuid") {
        return "\"\\\"\" " + primitive(format) + " \"\\\"\"";
      }
      return fail(path, fmt::format("unsupported format {} (date, time, date-time and uuid are)", json_text(f)));
    }
    STRATA_ASSIGN(const int64_t min, count(s, "minLength", 0, path));
    STRATA_ASSIGN(const int64_t max, count(s, "maxLength", -1, path));
    if (min == 0 && max < 0) return primitive("string");
    if (max >= 0 && max < min) return fail(path, "maxLength is below minLength");
    const std::string reps = max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    return "\"\\\"\" " + primitive("char") + reps + " \"\\\"\"";
  }

  Result<std::string> visit_number(const json& s, const std::string& path) {
    for (const char* key : {"maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(key)) return fail(path, fmt::format("keyword '{}' is not supported on numbers", key));
    }
    if (!s.contains("minimum")) return primitive("number");
    if (!s["minimum"].is_number() || s["minimum"].get<double>() != 0.0) {
      return fail(path, "keyword 'minimum' on numbers is supported only as 0");
    }
    return primitive("unsigned-number");
  }

  // The integer bounds of an integer schema (nullopt: none).
  Result<std::pair<std::optional<int64_t>, std::optional<int64_t>>> integer_bounds(const json& s, const std::string& path) {
    std::optional<int64_t> lo, hi;
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      if (!s[key].is_number()) return fail(path, fmt::format("'{}' must be a number", key));
      const double v = s[key].get<double>();
      // A bound past the range on the side it bounds restricts nothing the grammar writes (agents
      // send Number.MAX_SAFE_INTEGER as a maximum): it is dropped.
      const bool upper = std::string_view(key).find("ax") != std::string_view::npos;  // (exclusive)Maximum
      if (upper ? v > static_cast<double>(kMaxIntegerBound) : v < -static_cast<double>(kMaxIntegerBound)) continue;
      if (!(std::fabs(v) <= static_cast<double>(kMaxIntegerBound))) {
        return fail(path, fmt::format("'{}' {} is outside the supported range +-10^15", key, v));
      }
      const std::string k = key;
      if (k == "minimum") lo = std::max(lo.value_or(INT64_MIN), static_cast<int64_t>(std::ceil(v)));
      if (k == "exclusiveMinimum") lo = std::max(lo.value_or(INT64_MIN), static_cast<int64_t>(std::floor(v)) + 1);
      if (k == "maximum") hi = std::min(hi.value_or(INT64_MAX), static_cast<int64_t>(std::floor(v)));
      if (k == "exclusiveMaximum") hi = std::min(hi.value_or(INT64_MAX), static_cast<int64_t>(std::ceil(v)) - 1);
    }
    if (lo && hi && *lo > *hi) return fail(path, "the integer range is empty (minimum above maximum)");
    return std::make_pair(lo, hi);
  }

  Result<std::string> visit_integer(const json& s, const std::string& path) {
    STRATA_ASSIGN(auto bounds, integer_bounds(s, path));
    const auto [lo, hi] = bounds;
    if (!lo && !hi) return primitive("integer");
    std::string out;
    if (!lo || *lo < 0) {  // negatives: "-" |v| for v in [lo, min(hi, -1)]
      const int64_t top = hi ? std::min<int64_t>(*hi, -1) : -1;
      out = "\"-\" (" + non_negative_range(-top, lo ? -*lo : -1) + ")";
    }
    if (!hi || *hi >= 0) {
      const std::string pos = non_negative_range(lo ? std::max<int64_t>(*lo, 0) : 0, hi ? *hi : -1);
      out += (out.empty() ? "" : " | ") + ("(" + pos + ")");
    }
    return "(" + out + ")";
  }

  Result<std::string> visit_array(const json& s, const std::string& hint, const std::string& path, int depth) {
    std::string item = primitive("value");
    if (s.contains("items")) {
      if (s["items"].is_array()) return fail(path, "'items' as an array (tuple) is not supported");
      STRATA_ASSIGN(item, visit(s["items"], hint + "-item", path + "/items", depth + 1));
    }
    STRATA_ASSIGN(const int64_t min, count(s, "minItems", 0, path));
    STRATA_ASSIGN(const int64_t max, count(s, "maxItems", -1, path));
    if (max >= 0 && max < min) return fail(path, "maxItems is below minItems");
    const std::string sp = primitive("space");
    if (max == 0) return "\"[\" " + sp + " \"]\"";
    const int64_t more_min = std::max<int64_t>(min - 1, 0);
    const std::string reps = max < 0 ? fmt::format("{{{},}}", more_min) : fmt::format("{{{},{}}}", more_min, max - 1);
    const std::string items = fmt::format("{} {} (\",\" {} {} {}){}", item, sp, sp, item, sp, reps);
    return rule(hint, fmt::format("\"[\" {} {} \"]\"", sp, min == 0 ? "(" + items + ")?" : items));
  }

  // GBNF for a key no declared property has: an unescaped string outside `keys` (a trie over their
  // characters; escapes are left out so the text is the key).
  std::string other_key(const std::set<std::string>& keys, const std::string& hint) {
    std::map<std::string, std::string> memo;
    const std::string plain = primitive("plain-char");
    std::function<std::string(const std::string&)> node = [&](const std::string& prefix) -> std::string {
      std::set<std::string> next;  // the next characters (UTF-8) of keys longer than prefix
      bool is_key = false;
      for (const auto& k : keys) {
        if (k.rfind(prefix, 0) != 0) continue;
        if (k.size() == prefix.size()) {
          is_key = true;
          continue;
        }
        size_t len = 1;
        while (prefix.size() + len < k.size() && (static_cast<uint8_t>(k[prefix.size() + len]) & 0xC0) == 0x80) ++len;
        next.insert(k.substr(prefix.size(), len));
      }
      std::string body = is_key ? "" : "\"\\\"\"";
      std::string excluded = "^\"\\\\\\x00-\\x1F";
      for (const auto& c : next) {
        body += (body.empty() ? "" : " | ") + literal(c) + " " + node(prefix + c);
        excluded += c;
      }
      body += (body.empty() ? "" : " | ") + ("[" + excluded + "] " + plain + "* \"\\\"\"");
      return rule(hint, body);
    };
    return "\"\\\"\" " + node("");
  }

  Result<std::string> visit_object(const json& s, const std::string& hint, const std::string& path, int depth) {
    const json props = s.value("properties", json::object());
    if (!props.is_object()) return fail(path, "'properties' must be an object");
    const json add = s.contains("additionalProperties") ? s["additionalProperties"] : json();
    std::set<std::string> required;
    const json required_list = s.contains("required") ? s["required"] : json::array();
    if (!required_list.is_array()) return fail(path, "'required' must be an array");
    for (const auto& r : required_list) {
      if (!r.is_string()) return fail(path, "'required' must list strings");
      if (!props.contains(r.get<std::string>())) {  // the grammar could not make it appear
        return fail(path, fmt::format("required property '{}' is not in 'properties'", r.get<std::string>()));
      }
      required.insert(r.get<std::string>());
    }
    if (props.empty() && (add.is_null() || add == true)) return primitive("object");
    const std::string sp = primitive("space");
    std::vector<std::pair<std::string, bool>> kvs;  // rule, required
    std::set<std::string> plain_keys;
    properties_ += props.size();  // before any is visited: a huge object is refused at once
    if (auto e = over_budget(path)) return *e;
    for (const auto& [key, sub] : props.items()) {
      if (key.size() > kMaxKeyBytes) return fail(path, fmt::format("a property name is longer than {} bytes", kMaxKeyBytes));
      STRATA_ASSIGN(std::string value, visit(sub, hint + "-" + key, path + "/properties/" + key, depth + 1));
      kvs.emplace_back(rule(hint + "-" + key + "-kv", literal(json_text(json(key))) + " " + sp + " \":\" " + sp + " " + value),
                       required.count(key) > 0);
      if (json_text(json(key)) == "\"" + key + "\"") plain_keys.insert(key);
    }
    std::string extra;  // the grammar after the declared properties, given whether any came before
    std::string extra_first;
    if (!add.is_null() && add != false) {
      std::string value = primitive("value");
      if (add.is_object()) {
        STRATA_ASSIGN(value, visit(add, hint + "-additional", path + "/additionalProperties", depth + 1));
      }
      const std::string kv = rule(hint + "-additional-kv", other_key(plain_keys, hint + "-key") + " " + sp + " \":\" " + sp + " " + value);
      extra = fmt::format("(\",\" {} {} {})*", sp, kv, sp);
      extra_first = fmt::format("({} {} {})?", kv, sp, extra);
    }
    // rest(i, first): properties i.. given whether none was written yet.
    std::string rest_any = extra.empty() ? "\"\"" : extra, rest_first = extra_first.empty() ? "\"\"" : extra_first;
    for (size_t i = kvs.size(); i-- > 0;) {
      const auto& [kv, req] = kvs[i];
      const std::string with = fmt::format("\",\" {} {} {} {}", sp, kv, sp, rest_any);
      const std::string with_first = fmt::format("{} {} {}", kv, sp, rest_any);
      const std::string any = rule(hint + "-rest", req ? with : with + " | " + rest_any);
      const std::string first = rule(hint + "-rest-first", req ? with_first : with_first + " | " + rest_first);
      rest_any = any;
      rest_first = first;
    }
    return rule(hint, fmt::format("\"{{\" {} {} \"}}\"", sp, rest_first));
  }

  const json& root_;
  std::string prefix_;
  std::map<std::string, std::string> bodies_;
  std::vector<std::string> order_;
  std::map<std::string, int> next_suffix_;  // per base name: the last suffix given
  size_t nodes_ = 0, properties_ = 0;
  uint64_t bytes_ = 0;
  std::set<std::string> taken_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, std::string_view prefix) {
  try {
    return Converter(schema, std::string(prefix)).run();
  } catch (const json::exception& e) {  // a value of an unexpected JSON type deep inside
    return make_error(ErrorCode::kInvalidArgument, "json schema: {}", e.what());
  }
}

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, std::string_view prefix) {
  try {
    return json_schema_to_gbnf(json::parse(schema.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)), prefix);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kInvalidArgument, "json schema: {}", e.what());
  }
}

std::string json_object_gbnf() {
  auto text = json_schema_to_gbnf(json{{"type", "object"}});
  return text.ok() ? text.value() : std::string();
}

}  // namespace strata::grammar
