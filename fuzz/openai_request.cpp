// An OpenAI request body through to tokens, as the HTTP server handles it: server::parse_request for
// /v1/chat/completions and /v1/completions; when a body parses, the ChatML template renders the
// messages and a real vocabulary (stories260K, loaded once) tokenizes the prompt. The response and
// error objects are built and serialized too.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "server/openai_api.h"
#include "text/chat_template.h"

namespace {

const strata::text::Vocab& vocab() {
  static const auto v = strata::fuzz::load_vocab("models/stories260K.gguf");
  return *v;
}

const strata::text::ChatTemplate& chatml() {
  static const strata::text::ChatTemplate t = [] {
    auto c = strata::text::ChatTemplate::chatml();
    strata::text::jinja::RenderOptions o;
    o.limits.max_output = 1 << 20;
    o.now = 1'700'000'000;
    c.set_render_options(o);
    return c;
  }();
  return t;
}

void run(const std::string& body, bool chat) {
  strata::server::ParsedRequest req;
  if (auto e = strata::server::parse_request(body, chat, req)) {
    (void)e->body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  std::string prompt = req.prompt;
  if (req.chat) {
    strata::text::ChatRenderOptions o;
    o.enable_thinking = req.enable_thinking;
    o.tools_json = req.tools_json;
    auto rendered = chatml().render(req.messages, o);
    if (!rendered.ok()) return;
    prompt = std::move(*rendered);
  }
  req.generation.prompt = vocab().tokenize(prompt, true, true);
  const std::string text = vocab().detokenize(req.generation.prompt, false, false);
  const auto n_prompt = static_cast<int32_t>(req.generation.prompt.size());
  const auto dump = [](const nlohmann::json& j) {
    (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  dump(strata::server::completion_response(req, "id", req.model, text, {}, "stop", n_prompt, 1));
  dump(strata::server::stream_chunk(req, "id", req.model, text, {}, std::nullopt, true));
  dump(strata::server::stream_chunk(req, "id", req.model, "", {}, std::string("length"), false));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  strata::fuzz::quiet_logs();
  (void)vocab();
  (void)chatml();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(strata::fuzz::as_text(data, size));
  run(body, true);
  run(body, false);
  return 0;
}
