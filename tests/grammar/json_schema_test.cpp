// JSON schema -> GBNF: random walks through real vocabularies (random logits, many seeds) must
// give documents that parse and satisfy the schema, checked by an independent validator below;
// integer ranges are checked exhaustively; unsupported keywords are refused by name and path.
#include <gtest/gtest.h>

#include <chrono>

#include <nlohmann/json.hpp>
#include <regex>

#include "grammar/grammar.h"
#include "grammar_test_util.h"
#include "text/test_vocab.h"

namespace strata::grammar {
namespace {

using nlohmann::json;
using testing_util::matches;
using testing_util::must_parse;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

// A small JSON schema validator for the subset the converter supports: "" when `v` is valid.
class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::string check(const json& v, const json& s, const std::string& at = "$") const {
    if (s.is_boolean()) return s.get<bool>() ? "" : at + ": false schema";
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"];
      if (ref == "#") return check(v, root_, at);
      const size_t slash = ref.rfind('/');
      const std::string section = ref.substr(2, slash - 2);
      return check(v, root_[section][ref.substr(slash + 1)], at);
    }
    if (s.contains("const") && v != s["const"]) return at + ": not the const";
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return at + ": not in enum";
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      bool any = false;
      for (const auto& sub : s[key]) any = any || check(v, sub, at).empty();
      if (!any) return at + ": matches no " + key + " branch";
    }
    if (s.contains("allOf")) {
      for (const auto& sub : s["allOf"]) {
        if (auto e = check(v, sub, at); !e.empty()) return e;
      }
    }
    if (s.contains("type")) {
      const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
      bool any = false;
      for (const auto& t : types) any = any || has_type(v, t.get<std::string>());
      if (!any) return at + ": wrong type for " + s["type"].dump() + ": " + v.dump();
    }
    if (v.is_string()) return check_string(v.get<std::string>(), s, at);
    if (v.is_number()) return check_number(v, s, at);
    if (v.is_object()) return check_object(v, s, at);
    if (v.is_array()) return check_array(v, s, at);
    return "";
  }

 private:
  static bool has_type(const json& v, const std::string& t) {
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    return false;
  }

  static std::string check_string(const std::string& str, const json& s, const std::string& at) {
    const size_t n = code_points(str);
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return at + ": shorter than minLength";
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return at + ": longer than maxLength";
    if (s.contains("format")) {
      static const std::map<std::string, std::regex> formats = {
          {"date", std::regex(R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))")},
          {"time", std::regex(R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))")},
          {"date-time", std::regex(R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))")},
          {"uuid", std::regex(R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})")},
      };
      if (!std::regex_match(str, formats.at(s["format"].get<std::string>()))) return at + ": not a " + s["format"].get<std::string>();
    }
    return "";
  }

  static std::string check_number(const json& v, const json& s, const std::string& at) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return at + ": below minimum";
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return at + ": above maximum";
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return at + ": not above exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return at + ": not below exclusiveMaximum";
    return "";
  }

  std::string check_object(const json& v, const json& s, const std::string& at) const {
    const json props = s.value("properties", json::object());
    for (const auto& r : s.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return at + ": missing required " + r.get<std::string>();
    }
    for (const auto& [k, val] : v.items()) {
      if (props.contains(k)) {
        if (auto e = check(val, props[k], at + "." + k); !e.empty()) return e;
      } else if (s.contains("additionalProperties")) {
        if (auto e = check(val, s["additionalProperties"], at + "." + k); !e.empty()) return e;
      }
    }
    return "";
  }

  std::string check_array(const json& v, const json& s, const std::string& at) const {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": fewer than minItems";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": more than maxItems";
    if (s.contains("items")) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (auto e = check(v[i], s["items"], at + "[" + std::to_string(i) + "]"); !e.empty()) return e;
      }
    }
    return "";
  }

  const json& root_;
};

const char* const kSchemas[] = {
    // nested objects, required and optional properties, integer range, string lengths
    R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":12},
        "age":{"type":"integer","minimum":0,"maximum":150},
        "address":{"type":"object","properties":{"city":{"type":"string","maxLength":10},"zip":{"type":"integer","minimum":10000,"maximum":99999}},"required":["city"]}},
        "required":["name","age"]})",
    // enums, const, arrays with bounds
    R"({"type":"object","properties":{"color":{"enum":["red","green","bl\"ue",3,null]},"v":{"const":{"a":[1,true]}},
        "tags":{"type":"array","items":{"type":"string","maxLength":5},"minItems":1,"maxItems":3}},"required":["color","v","tags"]})",
    // anyOf / oneOf, type arrays, numbers, booleans
    R"({"type":"array","items":{"anyOf":[{"type":"integer","minimum":-20,"maximum":-3},{"type":"boolean"},{"type":["null","number"]}]},"maxItems":6})",
    R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"number","minimum":0}},"required":["kind","x"]},
                 {"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]})",
    // $defs refs, recursion, allOf merge
    R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},
        "$ref":"#/$defs/node"})",
    R"({"allOf":[{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"required":["a"]},
                 {"properties":{"b":{"type":"boolean"}},"required":["b"]}]})",
    // formats; additional properties with a schema
    R"({"type":"object","properties":{"d":{"type":"string","format":"date"},"t":{"type":"string","format":"date-time"},"u":{"type":"string","format":"uuid"}},
        "required":["d","t","u"],"additionalProperties":{"type":"integer","maximum":9}})",
    // no properties: any object; string array of exact length
    R"({"type":"object","properties":{"free":{"type":"object"},"three":{"type":"array","items":{"type":"string","minLength":2,"maxLength":2},"minItems":3,"maxItems":3}},"required":["three"]})",
    // definitions, optional-only properties, description/title ignored
    R"({"title":"t","description":"d","definitions":{"id":{"type":"integer","minimum":-1000000,"maximum":1000000}},
        "type":"object","properties":{"p":{"$ref":"#/definitions/id"},"q":{"$ref":"#/definitions/id"}}})",
};

void walk_schemas(const char* vocab_path, int seeds) {
  auto vocab = text::testing_util::load_shared_vocab(vocab_path);
  ASSERT_TRUE(vocab);
  const std::vector<float> bonus = testing_util::structural_bonus(*vocab);
  for (const char* text : kSchemas) {
    const json schema = json::parse(text);
    auto gbnf = json_schema_to_gbnf(schema);
    ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
    auto g = must_parse(*gbnf);
    ASSERT_TRUE(g);
    const Validator validator(schema);
    for (int seed = 0; seed < seeds; ++seed) {
      const auto walk = testing_util::random_walk(g, *vocab, static_cast<uint32_t>(seed), 4000, bonus);
      ASSERT_TRUE(walk.ended) << "no end after " << walk.steps << " tokens: " << walk.text.substr(0, 400);
      json doc;
      try {
        doc = json::parse(walk.text);
      } catch (const json::exception& e) {
        FAIL() << e.what() << "\n" << walk.text << "\nschema " << text;
      }
      EXPECT_EQ(validator.check(doc, schema), "") << walk.text << "\nschema " << text;
    }
  }
}

TEST(JsonSchema, random_walks_over_a_byte_level_vocab_give_valid_documents) {
  walk_schemas("models/vocab/ggml-vocab-qwen3.gguf", 20);
}

TEST(JsonSchema, random_walks_over_a_sentencepiece_vocab_give_valid_documents) {
  walk_schemas("models/vocab/ggml-vocab-llama-spm.gguf", 20);
}

TEST(JsonSchema, json_object_grammar_gives_objects) {
  auto vocab = text::testing_util::load_shared_vocab("models/vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(vocab);
  auto g = must_parse(json_object_gbnf());
  ASSERT_TRUE(g);
  const std::vector<float> bonus = testing_util::structural_bonus(*vocab);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto walk = testing_util::random_walk(g, *vocab, seed, 4000, bonus);
    ASSERT_TRUE(walk.ended) << walk.text.substr(0, 400);
    EXPECT_TRUE(json::parse(walk.text).is_object()) << walk.text;
  }
  EXPECT_FALSE(matches(g, "[1]"));
  EXPECT_TRUE(matches(g, R"({"a": {"b": [1, -2.5e+3, "\u00e9", true, null]}})"));
}

TEST(JsonSchema, integer_ranges_match_exactly_their_integers) {
  const std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ranges = {
      {-37, 142}, {5, 5}, {0, 1000}, {-1000, -5}, {13, std::nullopt}, {std::nullopt, -7}, {std::nullopt, 0},
      {-3, std::nullopt}, {99, 101}, {-109, -99}, {std::nullopt, 250}};
  for (const auto& [lo, hi] : ranges) {
    json schema = {{"type", "integer"}};
    if (lo) schema["minimum"] = *lo;
    if (hi) schema["maximum"] = *hi;
    auto gbnf = json_schema_to_gbnf(schema);
    ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
    auto g = must_parse(*gbnf);
    ASSERT_TRUE(g);
    for (int64_t v = -1500; v <= 1500; ++v) {
      const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
      ASSERT_EQ(matches(g, std::to_string(v)), in) << schema.dump() << " v=" << v;
    }
    EXPECT_FALSE(matches(g, "007"));
    EXPECT_FALSE(matches(g, "-0"));
    EXPECT_EQ(matches(g, "123456789012"), !hi && (!lo || *lo <= 123456789012));
  }
}

TEST(JsonSchema, optional_properties_may_be_left_out_in_any_combination) {
  auto gbnf = json_schema_to_gbnf(json::parse(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"]})"));
  ASSERT_TRUE(gbnf.ok());
  auto g = must_parse(*gbnf);
  EXPECT_TRUE(matches(g, R"({"b":1})"));
  EXPECT_TRUE(matches(g, R"({"a":1,"b":2})"));
  EXPECT_TRUE(matches(g, R"({ "a": 1, "b": 2, "c": 3 })"));
  EXPECT_TRUE(matches(g, "{\n  \"b\": 2,\n  \"c\": 3\n}"));
  EXPECT_FALSE(matches(g, R"({})"));
  EXPECT_FALSE(matches(g, R"({"a":1})"));
  EXPECT_FALSE(matches(g, R"({"b":1,})"));
  EXPECT_FALSE(matches(g, R"({"b":1,"d":2})"));
  EXPECT_FALSE(matches(g, R"({"b":1          })"));  // whitespace is bounded
}

TEST(JsonSchema, an_ordered_schema_keeps_the_clients_property_order) {
  const auto schema = nlohmann::ordered_json::parse(R"({"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"integer"}},"required":["z","a"]})");
  auto ordered = json_schema_to_gbnf(schema);
  ASSERT_TRUE(ordered.ok());
  auto g = must_parse(*ordered);
  EXPECT_TRUE(matches(g, R"({"z":1,"a":2})"));
  EXPECT_FALSE(matches(g, R"({"a":2,"z":1})"));
  auto sorted = json_schema_to_gbnf(json::parse(schema.dump()));  // std::map keys: sorted
  ASSERT_TRUE(sorted.ok());
  EXPECT_TRUE(matches(must_parse(*sorted), R"({"a":2,"z":1})"));
}

TEST(JsonSchema, additional_properties_never_repeat_a_declared_key) {
  auto gbnf = json_schema_to_gbnf(json::parse(R"({"type":"object","properties":{"ab":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})"));
  ASSERT_TRUE(gbnf.ok());
  auto g = must_parse(*gbnf);
  EXPECT_TRUE(matches(g, R"({"ab":1,"a":true,"abc":false,"x":true})"));
  EXPECT_TRUE(matches(g, R"({"b":true})"));
  EXPECT_FALSE(matches(g, R"({"ab":1,"ab":true})"));
  EXPECT_FALSE(matches(g, R"({"ab":true})"));
}

TEST(JsonSchema, prefixes_let_schemas_compose_into_one_grammar) {
  auto a = json_schema_to_gbnf(json::parse(R"({"type":"integer","maximum":3,"minimum":1})"), "a-");
  auto b = json_schema_to_gbnf(json::parse(R"({"type":"object","properties":{"x":{"type":"string"}}})"), "b_");
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto* text : {&*a, &*b}) {
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      EXPECT_TRUE(line.rfind(text == &*a ? "a-" : "b_", 0) == 0) << line;
    }
  }
  EXPECT_NE(a->find("a-root ::= "), std::string::npos);
  auto g = must_parse("root ::= a-root | b_root\n" + *a + *b);
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(g, "2"));
  EXPECT_TRUE(matches(g, R"({"x":"y"})"));
  EXPECT_FALSE(matches(g, "4"));
  EXPECT_FALSE(json_schema_to_gbnf(json::object(), "bad prefix").ok());
}

std::string schema_error(const char* text) {
  auto r = json_schema_to_gbnf(json::parse(text));
  if (r.ok()) {
    ADD_FAILURE() << "converted: " << text;
    return {};
  }
  return r.error().message;
}

TEST(JsonSchema, unsupported_keywords_are_refused_by_name_and_path) {
  EXPECT_EQ(schema_error(R"({"type":"object","properties":{"a":{"type":"string","pattern":"^a+$"}}})"),
            "json schema at #/properties/a: keyword 'pattern' is not supported");
  EXPECT_EQ(schema_error(R"({"type":"array","items":{"uniqueItems":true}})"),
            "json schema at #/items: unsupported keyword 'uniqueItems'");
  EXPECT_EQ(schema_error(R"({"$ref":"#/components/x"})"),
            "json schema at #: $ref '#/components/x' does not resolve (only #, #/$defs/NAME and #/definitions/NAME)");
  EXPECT_EQ(schema_error(R"({"type":"string","format":"email"})"),
            "json schema at #: unsupported format \"email\" (date, time, date-time and uuid are)");
  EXPECT_EQ(schema_error(R"({"type":"strin"})"), "json schema at #: unknown type 'strin'");
  EXPECT_EQ(schema_error(R"({"type":"integer","minimum":1e300})"),
            "json schema at #: 'minimum' 1e+300 is outside the supported range +-10^15");
  EXPECT_EQ(schema_error(R"({"type":"integer","maximum":-1e300})"),
            "json schema at #: 'maximum' -1e+300 is outside the supported range +-10^15");
  // Bounds past the range on their own side restrict nothing: Claude Code's Read tool sends
  // Number.MAX_SAFE_INTEGER as a maximum.
  EXPECT_TRUE(json_schema_to_gbnf(json::parse(R"({"type":"integer","minimum":0,"maximum":9007199254740991})")).ok());
  EXPECT_TRUE(json_schema_to_gbnf(json::parse(R"({"type":"integer","exclusiveMinimum":-1e300,"exclusiveMaximum":1e300})")).ok());
  EXPECT_EQ(schema_error(R"({"type":"array","maxItems":100000})"), "json schema at #: 'maxItems' 100000 is over the supported 4096");
  EXPECT_EQ(schema_error(R"({"type":"integer","minimum":5,"maximum":4})"),
            "json schema at #: the integer range is empty (minimum above maximum)");
  EXPECT_EQ(schema_error(R"(false)"), "json schema at #: schema false matches nothing");
  EXPECT_EQ(schema_error(R"({"type":"object","required":["a"]})"), "json schema at #: required property 'a' is not in 'properties'");
  EXPECT_EQ(schema_error(R"([1])"), "json schema at #: a schema must be an object or a boolean");
  EXPECT_EQ(schema_error(R"({"type":"number","maximum":3})"), "json schema at #: keyword 'maximum' is not supported on numbers");
  std::string deep = R"({"type":"object"})";
  for (int i = 0; i < 100; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_NE(schema_error(deep.c_str()).find("nested deeper than 64"), std::string::npos);
}

// Review finding: a rule-name search per property made N properties cost O(N^2) (10,000 held an HTTP
// worker for minutes). Conversion is linear now and a schema is bounded before and while converting.
TEST(JsonSchema, many_properties_convert_in_linear_time_and_too_many_are_refused_by_name) {
  auto object_of = [](int n) {
    json props = json::object();
    for (int i = 0; i < n; ++i) props["p" + std::to_string(i)] = json{{"type", "integer"}};
    return json{{"type", "object"}, {"properties", props}};
  };
  // Linear, whatever the machine's speed or load (CI failed an absolute 1 s bound under ASan on a
  // busy host): 4x the properties take about 4x the time, not the 16x of the quadratic search.
  auto best_seconds = [&](int n) {
    const json schema = object_of(n);
    double best = 1e9;
    for (int run = 0; run < 3; ++run) {
      const auto start = std::chrono::steady_clock::now();
      auto g = json_schema_to_gbnf(schema);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      EXPECT_TRUE(g.ok()) << g.error().message;
    }
    return best;
  };
  const double small = best_seconds(1000), large = best_seconds(4000);
  EXPECT_LT(large, 8 * small) << "1000 properties: " << small << " s, 4000: " << large << " s";
  auto big = json_schema_to_gbnf(object_of(kMaxSchemaProperties + 1));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("properties"), std::string::npos) << big.error().message;
  // Many small schemas: bounded by the nodes visited, whatever their kind.
  json many = json::array();
  for (size_t i = 0; i <= kMaxSchemaNodes; ++i) many.push_back(json{{"const", static_cast<int>(i)}});
  auto nodes = json_schema_to_gbnf(json{{"anyOf", many}});
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(nodes.error().message.find("schema nodes"), std::string::npos) << nodes.error().message;
}

}  // namespace
}  // namespace strata::grammar
