// strata quantize: rewrite an F32/F16/BF16 GGUF model as one of llama.cpp's quantization mixes.
#include <fmt/core.h>

#include "cli/common.h"
#include "tools/quantize.h"

namespace strata::cli {

Command add_quantize(CLI::App& app) {
  struct Flags {
    std::string in, out, type;
    int32_t n_threads = 0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("quantize", "quantize an F32/F16/BF16 GGUF model (as llama-quantize)");
  cmd->add_option("input", f->in, "input GGUF file")->required();
  cmd->add_option("output", f->out, "output GGUF file")->required();
  cmd->add_option("type", f->type, "q8_0, q4_0, q4_k_m, q5_k_m or q6_k (case-insensitive)")->required();
  cmd->add_option("-t,--threads", f->n_threads, "threads (0: all cores)")->capture_default_str();
  return [f]() -> int {
    const auto type = tools::quant_type_from_name(f->type);
    if (!type) {
      return fail(make_error(ErrorCode::kInvalidArgument,
                             "quantize: unknown type '{}' (q8_0, q4_0, q4_k_m, q5_k_m, q6_k)", f->type));
    }
    if (f->in == f->out) {
      return fail(make_error(ErrorCode::kInvalidArgument, "quantize: input and output are the same file"));
    }
    auto status = tools::quantize_model(f->in, f->out, *type, f->n_threads, [](const tools::QuantizeProgress& p) {
      fmt::print(stderr, "[{:4}/{:4}] {:<40} {:>5} -> {}\n", p.index, p.count, p.name, dtype_name(p.from),
                 dtype_name(p.to));
    });
    if (!status.ok()) return fail(status.error());
    fmt::print(stderr, "quantize: wrote {} ({})\n", f->out, tools::quant_type_name(*type));
    return 0;
  };
}

}  // namespace strata::cli
