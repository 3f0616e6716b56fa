// A real coding-agent CLI (Claude Code, from npm) and the official SDKs against `strata serve`,
// unmodified: their requests as they send them, recorded through a proxy and replayed
// (tests/server/agent_clients.mjs has the checks).
#include <gtest/gtest.h>

#include <filesystem>

#include "server/serve_process.h"
#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using testing::ServeProcess;

// Two servers: a story model that ends its answers with end-of-text, fed only the last user
// message (tests/server/data/story.jinja; stories260K never writes end-of-text, so a turn on it
// ends only at max_tokens, which the CLI reports as an error), for the CLI turn that must succeed;
// and stories260K with its default template (ChatML, no tool-call format, so tools take the generic
// JSON format) and a context for the CLI's whole 20k-token prompt, for everything else.
TEST(AgentClients, claude_code_and_the_sdks_run_their_turns_and_every_recorded_request_replays) {
  STRATA_SHARED_FILE(story_model, "models/TinyStories-656K-Q8_0.gguf");
  STRATA_SHARED_FILE(chat_model, "models/stories260K.gguf");
  const std::string dir = testing::node_clients_dir();
  const std::string claude = dir + "/node_modules/.bin/claude";
  ASSERT_TRUE(fs::exists(claude)) << "npm did not install @anthropic-ai/claude-code's CLI at " << claude;
  const std::string story_template = STRATA_SOURCE_DIR "/tests/server/data/story.jinja";
  ServeProcess story({"-m", story_model, "-c", "4096", "-n", "1024", "--chat-template-file", story_template}, "agent-story");
  ASSERT_TRUE(story.ok()) << story.log();
  ServeProcess chat({"-m", chat_model, "-c", "131072", "-n", "512"}, "agent-chat");
  ASSERT_TRUE(chat.ok()) << chat.log();
  const fs::path work = testing::server_tmp_dir() / "agent-work";
  fs::remove_all(work);
  fs::create_directories(work);
  std::ofstream(work / "notes.txt") << "Buy milk.\n";
  const auto r = testing::run_command("node " + testing::shell_quote(dir + "/agent_clients.mjs") + " " + story.url() +
                                      " " + chat.url() + " " + testing::shell_quote(claude) + " " +
                                      testing::shell_quote(work.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\n--- story server ---\n"
                            << testing::log_tail(story.log_path());
  EXPECT_NE(r.out.find(" passed, 0 failed"), std::string::npos) << r.out;
  std::printf("%s", r.out.c_str());
}

}  // namespace
}  // namespace strata
