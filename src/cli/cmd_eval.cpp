// strata eval: top logits at every prompt position plus the greedy continuation, for comparing engines.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cli/common.h"
#include "runtime/generate.h"

namespace strata::cli {
namespace {

std::vector<std::pair<int32_t, float>> top_n(const float* row, int32_t n_vocab, int32_t n) {
  std::vector<int32_t> ids(n_vocab);
  std::iota(ids.begin(), ids.end(), 0);
  n = std::min(n, n_vocab);
  // NaN (a broken model's logits) sorts last: a comparator it breaks is undefined behaviour.
  auto key = [&](int32_t i) { return std::isnan(row[i]) ? -INFINITY : row[i]; };
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return key(a) > key(b) || (key(a) == key(b) && a < b);
  });
  std::vector<std::pair<int32_t, float>> out;
  for (int32_t i = 0; i < n; ++i) out.emplace_back(ids[i], row[ids[i]]);
  return out;
}

int32_t argmax(const float* row, int32_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

}  // namespace

Command add_eval(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    std::string prompt;
    int32_t top = 10;
    int32_t n_greedy = 32;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("eval", "top logits at every prompt position and the greedy continuation");
  add_model_flags(*cmd, f->model);
  cmd->add_option("-p,--prompt", f->prompt, "prompt text")->required();
  cmd->add_option("--top", f->top, "logits to print per position")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-n,--n-predict", f->n_greedy, "greedy continuation length")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--json", f->json, "print JSON (prompt_tokens, top, greedy_tokens, greedy_text)");

  return [f]() -> int {
    runtime::LocalWorkers workers;
    auto engine = load_engine(f->model, workers);
    if (!engine.ok()) return fail(engine.error());
    runtime::Engine& e = **engine;
    const std::vector<text::Token> prompt = e.vocab().tokenize(f->prompt, true, false);
    auto logits = runtime::evaluate_prompt(e, 0, prompt, true);
    if (!logits.ok()) return fail(logits.error());
    const int32_t V = e.n_vocab();
    nlohmann::json top = nlohmann::json::array();
    for (size_t i = 0; i < prompt.size(); ++i) {
      nlohmann::json row = nlohmann::json::array();
      for (auto [id, value] : top_n(logits->data() + i * V, V, f->top)) row.push_back({id, value});
      top.push_back(row);
    }
    // Greedy: argmax (lowest id on ties), one token per decode, not stopping at end-of-generation.
    // Not runtime::generate(): it would decode the prompt again with only the last row's logits (a
    // one-row head product, not the row compared above) and stop a token before a full context.
    std::vector<text::Token> greedy;
    std::vector<float> last(logits->end() - V, logits->end());
    model::Batch batch;
    for (int32_t i = 0; i < f->n_greedy; ++i) {
      const int32_t token = argmax(last.data(), V);
      greedy.push_back(token);
      if (i + 1 == f->n_greedy) break;
      batch.clear();
      batch.add(token, static_cast<int32_t>(prompt.size()) + i, 0, true);
      auto next = e.decode(batch);
      if (!next.ok()) return fail(next.error());
      last = std::move(*next);
    }
    const std::string text = e.vocab().detokenize(greedy, false, false);
    if (f->json) {
      nlohmann::json out = {{"prompt_tokens", prompt}, {"top", top}, {"greedy_tokens", greedy},
                            {"greedy_text", text}};
      fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      for (size_t i = 0; i < prompt.size(); ++i) {
        fmt::print("{:4} {:>7} {:<16}", i, prompt[i], e.vocab().token_to_piece(prompt[i], true));
        for (const auto& pair : top[i]) fmt::print(" {}:{:.4f}", pair[0].get<int>(), pair[1].get<float>());
        fmt::print("\n");
      }
      fmt::print("greedy: {}\n", text);
    }
    return 0;
  };
}

}  // namespace strata::cli
