// strata perplexity: llama-perplexity's method over a text file.
#include <fmt/core.h>

#include <fstream>
#include <sstream>

#include "cli/common.h"
#include "runtime/perplexity.h"

namespace strata::cli {

Command add_perplexity(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    std::string file;
  };
  auto f = std::make_shared<Flags>();
  f->model.n_ctx = 512;
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of a model over a text file");
  add_model_flags(*cmd, f->model);
  cmd->add_option("-f,--file", f->file, "text file")->required()->check(CLI::ExistingFile);
  return [f]() -> int {
    std::ifstream in(f->file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in && !in.eof()) return fail(make_error(ErrorCode::kNotFound, "cannot read {}", f->file));
    const int32_t chunk = f->model.n_ctx;
    runtime::LocalWorkers workers;
    auto engine = load_engine(f->model, workers);
    if (!engine.ok()) return fail(engine.error());
    const auto tokens = (*engine)->vocab().tokenize(ss.str(), true, false);
    fmt::print(stderr, "{} tokens, chunks of {}\n", tokens.size(), chunk);
    auto r = runtime::perplexity(**engine, tokens, chunk, [](int32_t c, double ppl) {
      fmt::print(stderr, "[{}]{:.4f} ", c + 1, ppl);
    });
    fmt::print(stderr, "\n");
    if (!r.ok()) return fail(r.error());
    fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f} ({} chunks, {} tokens scored)\n", r->ppl, r->ppl_stderr,
               r->n_chunks, r->n_scored);
    return 0;
  };
}

}  // namespace strata::cli
