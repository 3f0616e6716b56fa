// The readers every wire format shares: an absent field and a null one read the same, a present one
// is the request's own value; tools of every format become OpenAI chat's function tools.
#include "server/request_fields.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace strata::server {
namespace {

using nlohmann::json;

TEST(RequestFields, an_absent_or_null_field_is_not_given) {
  const json j = {{"seed", nullptr}, {"stop", "x"}};
  EXPECT_EQ(optional_field(j, "temperature"), nullptr);
  EXPECT_EQ(optional_field(j, "seed"), nullptr);
  EXPECT_EQ(optional_field(json::array({1}), "stop"), nullptr);  // not an object: nothing to read
  EXPECT_EQ(optional_field(json("stop"), "stop"), nullptr);
}

TEST(RequestFields, a_given_field_is_the_requests_own_value) {
  const json j = {{"stop", "x"}, {"n", 0}, {"stream", false}, {"tools", json::array()}};
  const json* stop = optional_field(j, "stop");
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop, &j["stop"]);  // no copy
  // Falsy values are still given.
  ASSERT_NE(optional_field(j, "n"), nullptr);
  EXPECT_EQ(*optional_field(j, "n"), 0);
  ASSERT_NE(optional_field(j, "stream"), nullptr);
  EXPECT_EQ(*optional_field(j, "stream"), false);
  ASSERT_NE(optional_field(j, "tools"), nullptr);
  EXPECT_TRUE(optional_field(j, "tools")->empty());
}

TEST(RequestFields, readers_leave_an_absent_or_null_field_alone_and_name_a_wrong_one) {
  double temp = 0.5;
  EXPECT_FALSE(read_number(json{{"temperature", nullptr}}, "temperature", temp, 0, 2));
  EXPECT_EQ(temp, 0.5);
  int32_t top_k = 7;
  auto e = read_number_as(json{{"top_k", 1.5}}, "top_k", top_k, 0, 100, "sampling");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "sampling.top_k");
  EXPECT_EQ(e->message, "'sampling.top_k' must be an integer");
  std::string name;
  e = need_string(json{{"name", nullptr}}, "name", name, "tools[0]");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools[0].name");
  EXPECT_EQ(e->message, "'tools[0].name' is required");
}

TEST(RequestFields, tools_and_a_named_choice_take_openai_chats_shape) {
  const json schema = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};
  EXPECT_EQ(function_tool("get", "the weather", schema),
            json::parse(R"({"type":"function","function":{"name":"get","description":"the weather",
              "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}})"));
  EXPECT_EQ(function_tool_choice("get"), json::parse(R"({"type":"function","function":{"name":"get"}})"));
}

TEST(RequestFields, a_flat_tool_becomes_a_function_tool_and_its_schema_must_be_an_object) {
  json tools = json::array();
  ASSERT_FALSE(read_flat_tool(json{{"name", "get"}, {"input_schema", {{"type", "object"}}}}, "tools[0]", "input_schema",
                              true, tools));
  ASSERT_FALSE(read_flat_tool(json{{"name", "now"}, {"description", "the time"}, {"parameters", nullptr}}, "tools[1]",
                              "parameters", false, tools));
  EXPECT_EQ(tools, json::array({function_tool("get", "", {{"type", "object"}}),
                                function_tool("now", "the time", json::object())}));

  auto e = read_flat_tool(json{{"name", "get"}}, "tools[2]", "input_schema", true, tools);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools[2].input_schema");
  EXPECT_EQ(e->message, "'tools[2].input_schema' must be an object");
  e = read_flat_tool(json{{"name", "get"}, {"parameters", "{}"}}, "tools[3]", "parameters", false, tools);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools[3].parameters");
  e = read_flat_tool(json{{"description", "d"}, {"parameters", json::object()}}, "tools[4]", "parameters", false, tools);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools[4].name");
  EXPECT_EQ(tools.size(), 2u);  // nothing appended for a refused tool
}

}  // namespace
}  // namespace strata::server
