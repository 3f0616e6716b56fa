// strata tokenize: token ids of a text.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include "cli/common.h"
#include "text/vocab.h"

namespace strata::cli {

Command add_tokenize(CLI::App& app) {
  struct Flags {
    std::string model, prompt;
    bool no_bos = false, parse_special = false, pieces = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text");
  cmd->add_option("-m,--model", f->model, "GGUF file with a tokenizer")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--prompt", f->prompt, "text")->required();
  cmd->add_flag("--no-bos", f->no_bos, "do not add BOS/EOS");
  cmd->add_flag("--parse-special", f->parse_special, "turn special-token text into special tokens");
  cmd->add_flag("--pieces", f->pieces, "print each token with its text");
  return [f]() -> int {
    auto file = gguf::File::open(f->model);
    if (!file.ok()) return fail(file.error());
    auto vocab = text::Vocab::load(**file);
    if (!vocab.ok()) return fail(vocab.error());
    const auto ids = (*vocab)->tokenize(f->prompt, !f->no_bos, f->parse_special);
    if (f->pieces) {
      for (text::Token t : ids) fmt::print("{:>7} '{}'\n", t, (*vocab)->token_to_piece(t, true));
    } else {
      fmt::print("[{}]\n", fmt::join(ids, ", "));
    }
    return 0;
  };
}

}  // namespace strata::cli
