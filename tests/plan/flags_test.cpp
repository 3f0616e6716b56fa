// Parsing -ot, -ts and --rpc in llama.cpp's syntax, and -ot node names; nothing crashes on junk.
#include <gtest/gtest.h>

#include <random>

#include "plan/plan.h"
#include "plan_test_util.h"

namespace strata::plan {
namespace {

using namespace testing;

std::string rules_text(const std::vector<TensorOverride>& rules) {
  std::string s;
  for (const auto& r : rules) s += "[" + r.pattern + "|" + r.node_spec + "]";
  return s;
}

TEST(Flags, override_parsing) {
  auto r = parse_overrides("blk\\.([0-9]{1,2})\\.=127.0.0.1:50052,ffn_.*_exps=CPU");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(rules_text(*r), "[blk\\.([0-9]{1,2})\\.|127.0.0.1:50052][ffn_.*_exps|CPU]");
  // Commas inside {m,n}, (...) and [...] belong to the regex.
  r = parse_overrides("a{1,2}=local");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(rules_text(*r), "[a{1,2}|local]");
  r = parse_overrides("[,=]x=local,(a|b,c)=CPU");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(rules_text(*r), "[[,=]x|local][(a|b,c)|CPU]");
  r = parse_overrides("a\\{=local,b=CPU");  // an escaped brace opens nothing
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(rules_text(*r), "[a\\{|local][b|CPU]");
  // llama.cpp's RPC buffer names, with the brackets of the endpoint.
  r = parse_overrides("blk\\.1\\.=RPC0[127.0.0.1:50052],blk\\.2\\.=RPC1[127.0.0.1:50053]");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(rules_text(*r), "[blk\\.1\\.|RPC0[127.0.0.1:50052]][blk\\.2\\.|RPC1[127.0.0.1:50053]]");
  // A lookahead's '=' stays in the pattern: NODE is after the last '='.
  r = parse_overrides("blk(?=\\.1)=local");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(rules_text(*r), "[blk(?=\\.1)|local]");

  for (const char* bad : {"", " ", "noequals", "=local", "a=", "a=local,", ",a=local", "a=local,,b=CPU", "blk\\.(1=local",
                          "a[=local", "*=local"}) {
    auto e = parse_overrides(bad);
    EXPECT_FALSE(e.ok()) << "'" << bad << "' parsed as " << rules_text(*e);
  }
  auto e = parse_overrides("blk\\.(1=local");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("rule 'blk\\.(1=local'"), std::string::npos) << e.error().message;
  EXPECT_FALSE(parse_overrides(std::string(2000, 'a') + "=local").ok());
}

// std::regex backtracks exponentially through nested quantifiers; such patterns are refused up front
// (the planner would otherwise hang matching them against tensor names).
TEST(Flags, nested_quantifiers_are_refused) {
  for (const char* bad : {"(.*)*x", "(.+)+x", "((a*))*", "(x*){2}", "(?:.*)+", "((.*)b)*", "(a{2,})+"}) {
    auto e = parse_overrides(std::string(bad) + "=local");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.error().message.find("exponential time"), std::string::npos) << e.error().message;
  }
  for (const char* good : {"(ab)*x", "blk\\.(1|2)+\\.", "(.*)?x", "(.*){1}x", "(.*){0,1}", "\\(.*\\)*", "[(.*)]*",
                           "blk\\.([0-9]{1,2})\\.ffn_.*", ".*.*x", "(a)(b)*"}) {
    auto r = parse_overrides(std::string(good) + "=local");
    EXPECT_TRUE(r.ok()) << good << ": " << r.error().message;
  }
  // "(a)(.*)*" is nested too: the second group repeats an unbounded body.
  EXPECT_FALSE(parse_overrides("(a)(.*)*=local").ok());
}

TEST(Flags, node_names_resolve_to_the_workers) {
  const auto nodes = two_workers();
  for (const char* name : {"local", "CPU", "cpu", "Local", " local "}) {
    auto n = resolve_node(nodes, name);
    ASSERT_TRUE(n.ok()) << name;
    EXPECT_EQ(*n, 0);
  }
  EXPECT_EQ(*resolve_node(nodes, "127.0.0.1:50052"), 1);
  EXPECT_EQ(*resolve_node(nodes, "127.0.0.1:50053"), 2);
  EXPECT_EQ(*resolve_node(nodes, "RPC0[127.0.0.1:50053]"), 2);
  EXPECT_EQ(*resolve_node(nodes, "RPC7[127.0.0.1:50052]"), 1);
  EXPECT_EQ(*resolve_node(nodes, "RPC[127.0.0.1:50053]"), 2);
  auto e = resolve_node(nodes, "RPC0[10.0.0.1:1]");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("not in --rpc"), std::string::npos) << e.error().message;
  e = resolve_node(nodes, "CUDA0");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("valid names: local, CPU, 127.0.0.1:50052, RPC0[127.0.0.1:50052], 127.0.0.1:50053"),
            std::string::npos)
      << e.error().message;
  for (const char* bad : {"", "RPC0", "RPCx[127.0.0.1:50052]", "RPC0[]", "RPC0[127.0.0.1:50052", "127.0.0.1", "]"}) {
    EXPECT_FALSE(resolve_node(nodes, bad).ok()) << bad;
  }
  EXPECT_FALSE(resolve_node({local()}, "127.0.0.1:50052").ok());
}

TEST(Flags, tensor_split_parsing) {
  auto ts = parse_tensor_split("3,2");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(*ts, (std::vector<double>{3, 2}));
  EXPECT_EQ(*parse_tensor_split("3/2"), (std::vector<double>{3, 2}));
  EXPECT_EQ(*parse_tensor_split(" 0.5, 1.5 ,0"), (std::vector<double>{0.5, 1.5, 0}));
  for (const char* bad : {"", ",", "1,", "1,,2", "-1", "nan", "inf", "1e400", "abc", "1 2", "0x10"}) {
    EXPECT_FALSE(parse_tensor_split(bad).ok()) << bad;
  }
}

TEST(Flags, rpc_list_parsing) {
  auto rpc = parse_rpc_list("127.0.0.1:50052,127.0.0.1:50053");
  ASSERT_TRUE(rpc.ok());
  EXPECT_EQ(*rpc, (std::vector<std::string>{"127.0.0.1:50052", "127.0.0.1:50053"}));
  EXPECT_EQ(*parse_rpc_list("[::1]:50052, host-a:1"), (std::vector<std::string>{"[::1]:50052", "host-a:1"}));
  for (const char* bad : {"", "host", "host:", ":50052", "h:0", "h:70000", "h:5x", "h:1,h:1", "h:1,", "::1:50052"}) {
    EXPECT_FALSE(parse_rpc_list(bad).ok()) << bad;
  }
}

// Random junk through the parsers and the planner: errors, never crashes.
TEST(Flags, junk_never_crashes) {
  auto model = make_model(TinyLlama{.n_layer = 6}, "junk6");
  ASSERT_TRUE(model);
  const auto nodes = two_workers();
  const std::string alphabet = "blk\\.0123=,[](){}|*+?^$:-RPClocalCPU127.0.0.1:50052 ";
  std::mt19937 rng(7);
  for (int i = 0; i < 400; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    (void)parse_tensor_split(s);
    (void)parse_rpc_list(s);
    (void)resolve_node(nodes, s);
    auto rules = parse_overrides(s);
    if (!rules.ok()) continue;
    Request r = request({static_cast<double>(rng() % 3), static_cast<double>(rng() % 3)},
                        static_cast<int32_t>(rng() % 9) - 1);
    r.overrides = *rules;
    r.strict_placement = rng() % 2;
    auto p = make_plan(*model, nodes, r);
    if (p.ok()) {
      (void)render(*p);
    } else {
      EXPECT_NE(p.error().code, ErrorCode::kUnknown) << p.error().message;
    }
  }
}

// Shapes no stage could run are refused naming the flag, before any node is reached; the bounds are
// the stage's own (model::check_stage), so what the plan accepts a worker accepts.
TEST(Flags, request_shapes_outside_the_stage_bounds_are_refused_naming_the_flag) {
  const Request ok = [] {
    Request r;
    r.n_ctx = 4096;
    r.n_seq = 4;
    r.n_batch = 512;
    r.n_checkpoints = 8;
    return r;
  }();
  EXPECT_TRUE(check_request(ok).ok());
  Request most_checkpoints = ok;  // serve's --ctx-checkpoints takes up to 1024, plus one for speculation
  most_checkpoints.n_checkpoints = 1025;
  EXPECT_TRUE(check_request(most_checkpoints).ok());
  const auto refused = [&](auto change, const char* flag) {
    Request r = ok;
    change(r);
    const Status s = check_request(r);
    ASSERT_FALSE(s.ok()) << flag;
    EXPECT_NE(s.error().message.find(flag), std::string::npos) << s.error().message;
  };
  refused([](Request& r) { r.n_seq = 0; }, "-np");
  refused([](Request& r) { r.n_seq = model::kMaxStageSeqs + 1; r.n_ctx = 1 << 20; }, "-np");
  refused([](Request& r) { r.n_ctx = -1; }, "-c");
  refused([](Request& r) { r.n_ctx = 2; }, "smaller than the number of sequences");
  refused([](Request& r) { r.n_seq = 1; r.n_ctx = model::kMaxStageContext + 1; }, "-c / -np");
  refused([](Request& r) { r.n_batch = 0; }, "-b");
  refused([](Request& r) { r.n_batch = model::kMaxStageBatch + 1; }, "-b");
  refused([](Request& r) { r.n_checkpoints = -1; }, "--ctx-checkpoints");
  refused([](Request& r) { r.n_checkpoints = model::kMaxStageCheckpoints + 1; }, "--ctx-checkpoints");
}

}  // namespace
}  // namespace strata::plan
