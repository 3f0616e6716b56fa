// strata run: generate text from a prompt and report speed.
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "cli/common.h"
#include "runtime/generate.h"

namespace strata::cli {

Command add_run(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    sampling::Params sampling;
    SpecFlags spec;
    std::string prompt;
    int32_t n_predict = 128;
    bool ignore_eos = false;
    bool no_display_prompt = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt");
  add_model_flags(*cmd, f->model);
  add_sampling_flags(*cmd, f->sampling);
  add_spec_flags(*cmd, f->spec);
  cmd->add_option("-p,--prompt", f->prompt, "prompt text")->required();
  cmd->add_option("-n,--n-predict,--predict", f->n_predict, "tokens to generate (-1: until end of text or context)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
  cmd->add_flag("--ignore-eos", f->ignore_eos, "keep generating past end-of-generation tokens");
  cmd->add_flag("--no-display-prompt", f->no_display_prompt, "print only the generated text");

  return [f]() -> int {
    if (auto s = sampling::validate(f->sampling); !s.ok()) return fail(s.error());
    auto spec = spec_params(f->spec);
    if (!spec.ok()) return fail(spec.error());
    runtime::LocalWorkers workers;
    auto engine = load_engine(f->model, workers, runtime::Speculation::checkpoints_needed(*spec), spec->mtp());
    if (!engine.ok()) return fail(engine.error());
    runtime::Engine& e = **engine;
    runtime::GenerationRequest request;
    request.prompt = e.vocab().tokenize(f->prompt, true, false);
    request.n_predict = f->n_predict;
    request.ignore_eos = f->ignore_eos;
    request.spec = *spec;
    sampling::Sampler sampler(f->sampling, e.n_vocab());
    spdlog::info("sampling: temp {} top_k {} top_p {} min_p {} seed {}", f->sampling.temp, f->sampling.top_k,
                 f->sampling.top_p, f->sampling.min_p, sampler.seed());
    if (!f->no_display_prompt) fmt::print("{}", f->prompt);
    std::fflush(stdout);
    auto stats = runtime::generate(e, request, std::move(sampler), [](text::Token, const std::string& piece) {
      fmt::print("{}", piece);
      std::fflush(stdout);
      return true;
    });
    fmt::print("\n");
    std::fflush(stdout);  // the text ends before the speed report on a shared terminal
    if (!stats.ok()) return fail(stats.error());
    fmt::print(stderr, "prompt: {} tokens in {:.3f} s, {:.2f} tokens/s\n", stats->n_prompt, stats->prompt_seconds,
               stats->prompt_tokens_per_second());
    fmt::print(stderr, "generation: {} tokens in {:.3f} s, {:.2f} tokens/s\n", stats->n_generated,
               stats->generation_seconds, stats->generation_tokens_per_second());
    if (spec->enabled()) {
      const runtime::SpecStats& d = stats->spec;
      fmt::print(stderr, "speculation ({}): {} checks, {} tokens drafted, {} accepted ({:.1f}%)\n",
                 runtime::spec_type_name(spec->type), d.verifies, d.drafted, d.accepted, 100 * d.acceptance());
    }
    engine = make_error("done");  // close the links, then stop the local workers
    // A local worker that does not exit cleanly (a crash, a sanitizer report) fails the run too.
    return workers.stop() ? 0 : 1;
  };
}

}  // namespace strata::cli
