// --spec-type draft-mtp: the model's own MTP block drafts. Its drafts are checked against llama.cpp's
// (the reference llama-server in shared/peer, run live with -v on the same file and prompt, its
// "draft candidate" trace read back), greedy and sampled output against the output without
// speculation, the block's state after a cut-back against a block that never saw the cut tokens,
// and the planner's refusals.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "model/shard.h"
#include "model/stage_runner.h"
#include "runtime/generate.h"
#include "testing/cluster.h"
#include "testing/process.h"
#include "testing/shared_data.h"
#include "tools/synth.h"

namespace strata::runtime {
namespace {

using Tokens = std::vector<text::Token>;

std::filesystem::path scratch_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("strata_mtp_tests_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// The CLI's `strata synth --arch ARCH --mtp` model.
std::string synth_mtp_model(const std::string& arch) {
  tools::SynthSpec spec;
  spec.arch = arch;
  spec.n_nextn = 1;
  const std::string path = (scratch_dir() / (arch + "-mtp.gguf")).string();
  if (!std::filesystem::exists(path)) {
    const Status s = tools::write_synth_model(spec, path);
    EXPECT_TRUE(s.ok()) << s.error().message;
  }
  return path;
}

SpecParams mtp_spec(int32_t n_max = 3) {
  SpecParams s;
  s.type = SpecType::kDraftMtp;
  s.n_max = n_max;
  return s;
}

EngineOptions mtp_options(const std::string& model) {
  EngineOptions o = testing::single_node_options(model, 512);
  o.mtp = true;
  o.n_checkpoints = Speculation::checkpoints_needed(mtp_spec());
  return o;
}

const Tokens kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};

struct Draft {
  int32_t pos = 0;      // where the token it follows is decoded
  text::Token after = -1;
  std::vector<text::Token> tokens;
  std::vector<float> p;         // llama.cpp: the first candidate's probability per drafted token
  std::vector<float> margin;    // llama.cpp: its lead over the second candidate (1 when none shown)
};

struct GenRun {
  Tokens tokens;
  GenerationStats stats;
  std::vector<Draft> drafts;
};

GenRun generate_tokens(Engine& e, const Tokens& prompt, int32_t n, const SpecParams& spec, float temp) {
  GenerationRequest req;
  req.prompt = prompt;
  req.n_predict = n;
  req.ignore_eos = true;
  req.spec = spec;
  GenRun run;
  req.on_draft = [&](int32_t pos, text::Token after, std::span<const text::Token> draft) {
    run.drafts.push_back({pos, after, {draft.begin(), draft.end()}, {}, {}});
  };
  sampling::Params p;
  p.temp = temp;
  p.seed = 99;
  auto stats = generate(e, req, sampling::Sampler(p, e.n_vocab()), [&](text::Token t, const std::string&) {
    if (t >= 0) run.tokens.push_back(t);
    return true;
  });
  EXPECT_TRUE(stats.ok()) << stats.error().message;
  if (stats.ok()) run.stats = *stats;
  return run;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// llama-server -v logs each drafted position's best candidates, then the draft's start:
//   spec draft: - seq_id 3, draft candidate   0, pos   1:    543 (   0.657) ' under'
//   slot handle_last_: ... generate_draft: id=442, #tokens=16, #draft=3, pos_next=16
std::vector<Draft> parse_peer_drafts(const std::string& log) {
  static const std::regex candidate(R"(draft candidate\s+(\d+), pos\s+(\d+):\s+(\d+) \(\s*([0-9.]+)\))");
  static const std::regex start(R"(generate_draft: id=(\d+), #tokens=(\d+), #draft=(\d+), pos_next=(\d+))");
  std::vector<Draft> drafts;
  std::map<int, std::map<int, std::pair<int, float>>> shown;  // draft pos -> candidate -> (token, p)
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, candidate)) {
      shown[std::stoi(m[2])][std::stoi(m[1])] = {std::stoi(m[3]), std::stof(m[4])};
    } else if (std::regex_search(line, m, start)) {
      Draft d;
      d.after = std::stoi(m[1]);
      d.pos = std::stoi(m[4]);
      for (int i = 0; i < std::stoi(m[3]); ++i) {
        auto& c = shown[i];
        d.tokens.push_back(c.count(0) ? c[0].first : -1);  // -1: the log line was lost
        d.p.push_back(c.count(0) ? c[0].second : 0);
        d.margin.push_back(c.count(0) && c.count(1) ? c[0].second - c[1].second : 1);
      }
      drafts.push_back(std::move(d));
      shown.clear();
    }
  }
  return drafts;
}

// Greedy generation of n tokens by the reference llama-server with draft-mtp; its drafts.
std::vector<Draft> peer_drafts(const std::string& model, const Tokens& prompt, int32_t n) {
  const std::string peer = testing::shared_file("peer/llama.cpp/run");
  if (peer.empty()) return {};
  const int port = free_port();
  const std::string log = (scratch_dir() / "peer-server.log").string();
  testing::ChildProcess server;
  if (!testing::ChildProcess::start({"/bin/bash", peer, "llama-server", "-m", model, "--host", "127.0.0.1", "--port",
                                     std::to_string(port), "-t", "2", "-c", "512", "-np", "1", "--spec-type", "draft-mtp",
                                     "--spec-draft-n-max", "3", "--spec-draft-p-min", "0", "-v"},
                                    log, server)) {
    ADD_FAILURE() << "could not start llama-server";
    return {};
  }
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120);
  bool up = false;
  for (int i = 0; i < 600 && !up && server.running(); ++i) {
    auto r = client.Get("/health");
    up = r && r->status == 200;
    if (!up) ::usleep(100 * 1000);
  }
  if (!up) {
    ADD_FAILURE() << "llama-server did not come up: " << testing::log_tail(log);
    return {};
  }
  nlohmann::json body = {{"prompt", prompt}, {"n_predict", n}, {"temperature", 0}, {"top_k", 1},
                         {"cache_prompt", false}, {"ignore_eos", true}};
  // The reply may be an error about the synthetic vocabulary's text; the trace is in the log.
  (void)client.Post("/completion", body.dump(), "application/json");
  server.stop();
  std::ifstream in(log, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  return parse_peer_drafts(all.str());
}

TEST(MtpDrafts, equal_llama_cpp_draft_mtp_drafts_for_32_tokens) {
  for (const char* arch : {"qwen35", "qwen35moe"}) {
    const std::string model = synth_mtp_model(arch);
    const std::vector<Draft> want = peer_drafts(model, kPrompt, 32);
    ASSERT_GE(want.size(), 20u) << arch << ": llama-server logged too few drafts";
    auto e = Engine::load(mtp_options(model));
    ASSERT_TRUE(e.ok()) << e.error().message;
    const GenRun got = generate_tokens(**e, kPrompt, 32, mtp_spec(), 0);
    std::map<int32_t, const Draft*> by_pos;
    for (const Draft& d : got.drafts) by_pos[d.pos] = &d;
    int compared = 0;
    for (const Draft& w : want) {
      ASSERT_TRUE(by_pos.count(w.pos)) << arch << ": llama.cpp drafted after position " << w.pos << ", Strata did not";
      const Draft& g = *by_pos[w.pos];
      ASSERT_EQ(g.after, w.after) << arch << " at " << w.pos << ": the generations differ";
      ASSERT_EQ(g.tokens.size(), w.tokens.size()) << arch << " at " << w.pos;
      for (size_t i = 0; i < w.tokens.size(); ++i) {
        if (w.tokens[i] < 0) continue;
        // A near tie between llama.cpp's two best (it prints 3 decimals) may go either way in f32.
        if (w.margin[i] < 0.002f) break;
        EXPECT_EQ(g.tokens[i], w.tokens[i]) << arch << ": draft after position " << w.pos << ", token " << i
                                            << " (llama.cpp p=" << w.p[i] << ")";
        if (g.tokens[i] != w.tokens[i]) break;  // the rest of the chain follows another token
        ++compared;
      }
    }
    EXPECT_GE(compared, 60) << arch;
    std::printf("[ mtp      ] %s: %d drafted tokens equal llama.cpp's in %zu drafts\n", arch, compared, want.size());
  }
}

// Greedy and seeded sampling: the same tokens with and without draft-mtp, on the dense and MoE
// hybrids (each refused draft restores the recurrent state and replays the kept tokens).
TEST(MtpDrafts, greedy_and_sampled_tokens_are_the_same_as_without_speculation) {
  for (const char* arch : {"qwen35", "qwen35moe"}) {
    auto e = Engine::load(mtp_options(synth_mtp_model(arch)));
    ASSERT_TRUE(e.ok()) << e.error().message;
    for (float temp : {0.0f, 0.8f}) {
      const GenRun plain = generate_tokens(**e, kPrompt, 96, {}, temp);
      const GenRun spec = generate_tokens(**e, kPrompt, 96, mtp_spec(), temp);
      ASSERT_EQ(plain.tokens.size(), 96u);
      EXPECT_EQ(spec.tokens, plain.tokens) << arch << " at temp " << temp;
      EXPECT_GT(spec.stats.spec.drafted, 50) << arch;
    }
  }
}

// After a check, the block's state cut back to the kept tokens drafts exactly as a block that only
// ever saw them: the hidden state it continues from is the one before the check, then the kept rows'.
TEST(MtpDrafts, a_cut_back_block_drafts_as_one_that_never_saw_the_cut_tokens) {
  const std::string path = synth_mtp_model("qwen35moe");
  auto model = model::Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const std::shared_ptr<const model::Model> m = *model;
  model::StageConfig c;
  c.owned.assign(static_cast<size_t>(m->hparams().n_layer), 1);
  c.input = c.output = c.mtp = true;
  c.tensors = model::tensors_needed(*m, c.owned, true, true, true);
  c.n_ctx_per_seq = 256;
  c.n_threads = 2;
  auto make = [&] {
    auto r = model::StageRunner::create(m, c);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return std::move(*r);
  };
  auto feed = [](model::StageRunner& r, const Tokens& tokens, int32_t first) {
    model::Batch b;
    for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], first + static_cast<int32_t>(i), 0, true);
    std::vector<float> hidden;
    r.embed(b, hidden);
    ASSERT_TRUE(r.run_layers(b, 0, r.model().hparams().n_layer, hidden.data()).ok());
    (void)r.logits(b, hidden.data());
  };
  const Tokens check = {500, 501, 502, 503};  // a waiting token and a draft of three
  const int32_t first = static_cast<int32_t>(kPrompt.size());
  c.n_checkpoints = 1;
  for (int32_t kept = 0; kept <= 3; ++kept) {
    auto cut = make(), fresh = make();
    feed(*cut, kPrompt, 0);
    // Speculation's cut-back on a hybrid model: back to the checkpoint, the kept tokens again.
    ASSERT_TRUE(cut->save_checkpoint(0, first).ok());
    feed(*cut, check, first);
    ASSERT_TRUE(cut->restore_checkpoint(0, first).ok());
    const Tokens again(check.begin(), check.begin() + kept);
    if (kept > 0) feed(*cut, again, first);
    const int32_t end = first + kept;
    Tokens seen = kPrompt;
    seen.insert(seen.end(), again.begin(), again.end());
    feed(*fresh, seen, 0);
    auto a = cut->draft_mtp(0, 42, end, {.n_max = 3, .p_min = 0});
    auto b = fresh->draft_mtp(0, 42, end, {.n_max = 3, .p_min = 0});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b) << "kept " << kept;
  }
}

// Layer split: the worker holding the output head holds the MTP block and its cache (the plan says
// so, with their bytes) and drafts there over the Draft call; its drafts are the single node's.
// Two nodes draft exactly as one node and give the same tokens as without speculation; `drafter`
// is the node the plan puts the block on, and only it lists the block's tensors.
void expect_two_nodes_draft_as_one(plan::SplitMode mode, int32_t drafter) {
  testing::TestCluster cluster(1, 1, "mtp-two");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  for (const char* arch : {"qwen35", "qwen35moe"}) {
    const std::string model = synth_mtp_model(arch);
    auto one = Engine::load(mtp_options(model));
    ASSERT_TRUE(one.ok()) << one.error().message;
    const GenRun want = generate_tokens(**one, kPrompt, 64, mtp_spec(), 0);
    const GenRun plain = generate_tokens(**one, kPrompt, 64, {}, 0);
    one->reset();
    EngineOptions o = testing::cluster_options(model, cluster, 512);
    o.mtp = true;
    o.n_checkpoints = Speculation::checkpoints_needed(mtp_spec());
    o.cluster.tensor_split = {1, 1};
    o.cluster.split_mode = mode;
    auto two = Engine::load(o);
    ASSERT_TRUE(two.ok()) << two.error().message;
    const plan::Plan& p = (*two)->plan();
    ASSERT_EQ(p.output_node, drafter) << arch;
    const std::string block = "blk." + std::to_string((*two)->hparams().n_layer) + ".nextn.eh_proj.weight";
    for (int32_t n = 0; n < 2; ++n) {
      const model::StageConfig& st = p.node_stages[n];
      EXPECT_EQ(st.mtp, n == drafter) << arch << ", node " << n;
      EXPECT_EQ(std::find(st.tensors.begin(), st.tensors.end(), block) != st.tensors.end(), n == drafter) << arch;
    }
    if (mode == plan::SplitMode::kTensor) {  // the drafter's bytes hold the block and the whole head
      plan::Request r;
      r.split_mode = mode;
      r.tensor_split = {1, 1};
      r.n_ctx = 512;
      r.mtp = true;
      auto with = plan::make_plan((*two)->model(), p.nodes, r);
      r.mtp = false;
      auto without = plan::make_plan((*two)->model(), p.nodes, r);
      ASSERT_TRUE(with.ok() && without.ok());
      uint64_t extra = 0;
      for (const auto& t : (*two)->model().tensors()) {
        if (t.decl.mtp) extra += model::shard_tensor_bytes((*two)->model(), t.decl.name, {}, p.node_stages[0].repack);
        if (t.decl.name == "output.weight") extra += t.info->nbytes;
      }
      EXPECT_GE(with->bytes[0].weights, without->bytes[0].weights + extra) << arch;
      EXPECT_EQ(with->bytes[1].weights, without->bytes[1].weights) << arch;
    }
    const GenRun got = generate_tokens(**two, kPrompt, 64, mtp_spec(), 0);
    EXPECT_EQ(got.tokens, plain.tokens) << arch;
    EXPECT_EQ(got.tokens, want.tokens) << arch;
    ASSERT_EQ(got.drafts.size(), want.drafts.size()) << arch;
    for (size_t i = 0; i < want.drafts.size(); ++i) {
      EXPECT_EQ(got.drafts[i].pos, want.drafts[i].pos) << arch;
      EXPECT_EQ(got.drafts[i].tokens, want.drafts[i].tokens) << arch << ", draft " << i;
    }
    EXPECT_GT(got.drafts.size(), 10u);
  }
}

TEST(MtpDrafts, two_nodes_layer_split_draft_on_the_output_node_as_one_node_does) {
  expect_two_nodes_draft_as_one(plan::SplitMode::kLayer, 1);
}

// Under -sm tensor every member holds a slice of the head; the block drafts on this machine with the
// whole head (its bytes are in this machine's share of the plan).
TEST(MtpDrafts, two_nodes_tensor_split_draft_on_this_machine_as_one_node_does) {
  expect_two_nodes_draft_as_one(plan::SplitMode::kTensor, 0);
}

TEST(MtpDrafts, the_planner_refuses_what_it_cannot_place_naming_why) {
  // No MTP block in the file.
  STRATA_SHARED_FILE(plain, "models/synth/qwen35-dense-f32.gguf");
  auto none = Engine::load(mtp_options(plain));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("multi-token-prediction"), std::string::npos) << none.error().message;
  EXPECT_EQ(parse_spec_type("draft-mtp").value(), SpecType::kDraftMtp);

  // -sm tensor with shares for the workers only: this machine, where the block drafts, holds no slice.
  testing::TestCluster cluster(2, 1, "mtp");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  EngineOptions tensor = testing::cluster_options(synth_mtp_model("qwen35"), cluster, 512);
  tensor.mtp = true;
  tensor.cluster.split_mode = plan::SplitMode::kTensor;
  tensor.cluster.tensor_split = {1, 1};
  auto split = Engine::load(tensor);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.error().message.find("gives it no share"), std::string::npos) << split.error().message;
  tensor.cluster.tensor_split = {1, 1, 1};
  EXPECT_TRUE(Engine::load(tensor).ok());
}

}  // namespace
}  // namespace strata::runtime
