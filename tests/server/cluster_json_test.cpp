// /v1/cluster returns the plan's decisions as data: a split by -ts and an -ot pin that moves a layer
// come back with their kind, flags, layers, nodes and placement, beside the sentence the logs print.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "serve_process.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

using nlohmann::json;

const json* find_kind(const json& decisions, const std::string& kind) {
  for (const json& d : decisions) {
    if (d.value("kind", "") == kind) return &d;
  }
  return nullptr;
}

TEST(ClusterJson, decisions_come_back_as_fields_and_text) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");  // 5 layers
  testing::ServeProcess server({"-m", model, "-c", "256", "--local-workers", "1", "-ts", "1,1", "-ot", "blk\\.3\\.=local"},
                               "cluster-json");
  ASSERT_TRUE(server.ok()) << server.log();
  auto c = server.client();
  auto r = c.Get("/v1/cluster");
  ASSERT_TRUE(r) << "no answer";
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  ASSERT_EQ(j["nodes"].size(), 2u);
  const std::string worker = j["nodes"][1]["name"];
  EXPECT_LE(j["nodes"][1]["memory_usable"].get<uint64_t>(), j["nodes"][1]["memory_limit"].get<uint64_t>());

  const json* split = find_kind(j["decisions"], "split_by_flags");
  ASSERT_NE(split, nullptr) << j["decisions"].dump();
  EXPECT_EQ((*split)["flags"], "-ts 1,1");
  ASSERT_EQ((*split)["placement"].size(), 6u);  // 5 layers + the output head
  EXPECT_EQ((*split)["placement"][3], worker);

  const json* moved = find_kind(j["decisions"], "pin_moved_layers");
  ASSERT_NE(moved, nullptr) << j["decisions"].dump();
  EXPECT_EQ((*moved)["layers"], json::array({3}));
  EXPECT_EQ((*moved)["node"], "local");
  EXPECT_EQ((*moved)["from_node"], worker);
  EXPECT_EQ((*moved)["rules"], json::array({"blk\\.3\\.=local"}));
  EXPECT_NE((*moved)["text"].get<std::string>().find("-ot decides layer 3"), std::string::npos) << (*moved)["text"];

  const json* final_placement = find_kind(j["decisions"], "final_placement");
  ASSERT_NE(final_placement, nullptr);
  EXPECT_EQ((*final_placement)["placement"][3], "local");
}

// serve --n-depth: -ts auto balances, and the plan predicts, for requests that deep (a coding agent's
// run tens of thousands of tokens); /v1/cluster gives the prediction it planned with.
TEST(ClusterJson, serve_plans_for_the_depth_it_is_given) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  testing::ServeProcess server({"-m", model, "-c", "512", "--local-workers", "1", "--n-depth", "300"}, "cluster-depth");
  ASSERT_TRUE(server.ok()) << server.log();
  auto r = server.client().Get("/v1/cluster");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  const json j = json::parse(r->body);
  ASSERT_TRUE(j["prediction"].is_object()) << j.dump();
  EXPECT_EQ(j["prediction"]["depth"], 300);
  EXPECT_GT(j["prediction"]["tokens_per_second"].get<double>(), 0.0);
  EXPECT_EQ(j["prediction"]["ms_per_token"].size(), 2u);
  const json* split = find_kind(j["decisions"], "split_by_speed");
  ASSERT_NE(split, nullptr) << j["decisions"].dump();
  EXPECT_NE((*split)["text"].get<std::string>().find("at depth 300"), std::string::npos) << (*split)["text"];
  // A depth outside a slot's context is refused at start, naming the flag.
  testing::ServeProcess deep({"-m", model, "-c", "512", "--local-workers", "1", "--n-depth", "512"}, "cluster-too-deep");
  EXPECT_FALSE(deep.ok());
  EXPECT_NE(deep.log().find("--n-depth"), std::string::npos) << deep.log();
}

}  // namespace
}  // namespace strata
