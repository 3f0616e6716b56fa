// A request body through to tokens, as the HTTP server handles it: each wire format (OpenAI chat and
// completions, Anthropic messages, OpenAI responses) parses it into a TurnRequest; when it parses, the
// ChatML template renders the messages (with the tools) and a real vocabulary (stories260K, loaded once)
// tokenizes the prompt. The formats' responses, stream events and error objects are built and
// serialized too.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "server/anthropic_api.h"
#include "server/openai_api.h"
#include "server/responses_api.h"
#include "text/chat_template.h"

namespace {

const strata::text::Vocab& vocab() {
  static const auto v = strata::fuzz::load_vocab("models/stories260K.gguf");
  return *v;
}

const strata::text::ChatTemplate& chatml() {
  static const strata::text::ChatTemplate t = [] {
    auto c = strata::text::ChatTemplate::chatml();
    strata::jinja::RenderOptions o;
    o.limits.max_output = 1 << 20;
    o.now = 1'700'000'000;
    c.set_render_options(o);
    return c;
  }();
  return t;
}

void dump(const nlohmann::json& j) { (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::unique_ptr<strata::server::WireFormat> wire_format(int kind) {
  using namespace strata::server;
  switch (kind) {
    case 0: return std::make_unique<OpenAiCompletions>(true);
    case 1: return std::make_unique<OpenAiCompletions>(false);
    case 2: return std::make_unique<AnthropicMessages>();
    default: return std::make_unique<OpenAiResponses>();
  }
}

void run(const std::string& body, int kind) {
  auto wire = wire_format(kind);
  nlohmann::json j;
  strata::server::TurnRequest turn;
  auto e = strata::server::parse_body(body, j);
  if (!e) e = wire->parse(j, turn);
  if (e) return dump(wire->error_body(*e));
  std::string prompt = turn.prompt;
  if (turn.chat) {
    strata::text::ChatRenderOptions o;
    if (!turn.tools.empty()) o.tools_json = turn.tools.dump();
    if (!turn.template_kwargs.empty()) o.kwargs_json = turn.template_kwargs.dump();
    auto rendered = chatml().render(turn.messages, o);
    if (!rendered.ok()) return;
    prompt = std::move(*rendered);
  }
  const auto tokens = vocab().tokenize(prompt, true, true);
  const std::string text = vocab().detokenize(tokens, false, false);
  wire->set_served("model", "id", 1);
  strata::server::TurnResult r;
  r.content = text;
  r.finish_reason = "stop";
  r.usage.prompt_tokens = static_cast<int32_t>(tokens.size());
  dump(wire->response(r));
  strata::server::TurnEvents ev;
  ev.content = text;
  std::string sse = wire->stream_start(r.usage) + wire->stream_events(ev);
  ev.content.clear();
  ev.done = true;
  ev.finish_reason = "length";
  sse += wire->stream_events(ev);
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
  for (int kind = 0; kind < 4; ++kind) run(body, kind);
  return 0;
}
