// Chat templates under the Jinja limits: over-deep JSON from a request is refused, a template that
// exceeds the budget on a sample conversation at load falls back to ChatML, and real templates stay far
// below the budget.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "jinja/jinja.h"
#include "jinja/limits_test_util.h"
#include "testing/shared_data.h"
#include "text/chat_template.h"

namespace strata::text {
namespace {

using strata::testing::repeat;

TEST(ChatTemplateLimits, deeply_nested_json_in_tools_or_arguments_is_refused) {
  const std::string deep = repeat("[", 10000) + repeat("]", 10000);
  ChatRenderOptions options;
  options.tools_json = deep;
  ChatMessage call;
  call.role = "assistant";
  call.tool_calls = {{"id", "f", repeat("{\"a\":", 10000) + "1" + repeat("}", 10000)}};
  auto out = ChatTemplate::chatml().render({call}, options);
  ASSERT_FALSE(out.ok());
  EXPECT_ERROR_MENTIONS(out.error().message, "nested deeper");
  // Without the tools, the over-deep arguments are passed on as a string and the render works.
  options.tools_json.clear();
  EXPECT_TRUE(ChatTemplate::chatml().render({call}, options).ok());
}

std::shared_ptr<const gguf::File> gguf_with_template(const std::string& source) {
  gguf::Writer w;
  w.set_string("general.architecture", "test");
  w.set_string("tokenizer.chat_template", source);
  auto bytes = w.write_to_memory();
  EXPECT_TRUE(bytes.ok());
  auto file = gguf::File::from_bytes(bytes.value(), "test.gguf");
  EXPECT_TRUE(file.ok()) << file.error().message;
  return file.value();
}

TEST(JinjaBudget, item8_loading_test_renders_and_falls_back_to_chatml_over_the_budget) {
  const std::string hostile[] = {
      "{% for i in range(100) %}{% set x = 'y' * 10000000 %}{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}",
      "{% for i in range(100000000) %}{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}",
      "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}{% for i in range(10000) %}"
      "{% for j in range(10000) %}{% endfor %}{% endfor %}{% endif %}",
  };
  for (const auto& source : hostile) {
    std::string warning;
    auto t = load_chat_template(*gguf_with_template(source), &warning);
    ASSERT_TRUE(t.ok());
    EXPECT_NE(warning.find("ChatML"), std::string::npos) << source << ": " << warning;
    EXPECT_TRUE(warning.find("memory budget") != std::string::npos ||
                warning.find("evaluation steps") != std::string::npos ||
                warning.find("exceeds the limit") != std::string::npos)
        << warning;
    EXPECT_EQ(t->source().find("range"), std::string::npos) << "kept the hostile template";
  }
  // A template that raises for roles it does not support (or on our sample) is still used.
  const std::string strict =
      "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('bad role') }}"
      "{% endif %}[{{ m.role }}] {{ m.content }}{% endfor %}";
  std::string warning = "stale";
  auto t = load_chat_template(*gguf_with_template(strict), &warning);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(warning, "");
  EXPECT_EQ(t->source(), strict);
  // The real Qwen3 template passes the test render.
  STRATA_SHARED_FILE(path, "models/vocab/ggml-vocab-qwen3.gguf");
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto qwen = load_chat_template(*file.value(), &warning);
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(warning, "");
  EXPECT_NE(qwen->source().find("<tool_response>"), std::string::npos);
}


// The budgets leave real templates plenty of room: the Qwen3 template on a long conversation (100 turns,
// 800 KB, with reasoning and tools) uses a fraction of them.
TEST(JinjaBudget, real_templates_render_long_conversations_well_within_the_budget) {
  STRATA_SHARED_FILE(path, "models/vocab/ggml-vocab-qwen3.gguf");
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  std::string warning;
  auto t = load_chat_template(*file.value(), &warning);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(warning, "");
  std::vector<ChatMessage> messages(1);
  messages[0].role = "system";
  messages[0].content = "You are a helpful assistant.";
  for (int i = 0; i < 100; ++i) {
    ChatMessage m;
    m.role = i % 2 ? "assistant" : "user";
    m.content = (i % 2 ? "<think>\nreasoning " + std::string(2000, 'r') + "\n</think>\n\n" : std::string()) +
                std::string(6000, static_cast<char>('a' + i % 26));
    messages.push_back(std::move(m));
  }
  ChatRenderOptions options;
  options.tools_json = R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])";
  jinja::RenderStats stats;
  auto out = t->render(messages, options, &stats);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_GT(out->size(), 600000u);
  const jinja::Limits defaults;
  EXPECT_LT(stats.steps, defaults.max_steps / 10);
  EXPECT_LT(stats.memory, defaults.max_memory / 4);
}

}  // namespace
}  // namespace strata::text
