// strata info: metadata and tensor table of a GGUF file (model or vocab-only).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "cli/common.h"
#include "gguf/names.h"
#include "model/model.h"

namespace strata::cli {
namespace {

std::string value_string(const gguf::KeyValue& kv) {
  using gguf::ValueType;
  switch (kv.type) {
    case ValueType::U8: case ValueType::U16: case ValueType::U32: case ValueType::U64: return std::to_string(kv.u);
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64: return std::to_string(kv.i);
    case ValueType::F32: case ValueType::F64: return fmt::format("{}", kv.f);
    case ValueType::BOOL: return kv.u ? "true" : "false";
    case ValueType::STRING: {
      std::string s(kv.str.substr(0, 80));
      for (char& c : s) if (c == '\n' || c == '\r') c = ' ';
      return kv.str.size() > 80 ? fmt::format("\"{}...\" ({} bytes)", s, kv.str.size()) : fmt::format("\"{}\"", s);
    }
    case ValueType::ARRAY: {
      std::string head;
      if (kv.array_type == ValueType::STRING) {
        for (size_t i = 0; i < std::min<size_t>(kv.strings.size(), 4); ++i) head += fmt::format("\"{}\", ", kv.strings[i]);
      }
      return fmt::format("[{} x {}{}]", kv.array_size, gguf::value_type_name(kv.array_type),
                         head.empty() ? "" : ": " + head + "...");
    }
  }
  return "?";
}

}  // namespace

Command add_info(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "print a GGUF file's metadata and tensors");
  cmd->add_option("-m,--model", *path, "GGUF file")->required()->check(CLI::ExistingFile);
  return [path]() -> int {
    auto file = gguf::File::open(*path);
    if (!file.ok()) return fail(file.error());
    const gguf::File& f = **file;
    fmt::print("file: {}\nGGUF version {}, {} metadata keys, {} tensors, alignment {}, {} bytes\n\n", f.path(),
               f.version(), f.kvs().size(), f.tensors().size(), f.alignment(), f.bytes().size());
    for (const auto& kv : f.kvs()) fmt::print("{:<48} {}\n", kv.key, value_string(kv));
    if (!f.tensors().empty()) {
      fmt::print("\n{:<40} {:<7} {:<24} {:>12}\n", "tensor", "type", "shape", "bytes");
      uint64_t total = 0, params = 0;
      for (const auto& t : f.tensors()) {
        fmt::print("{:<40} {:<7} {:<24} {:>12}\n", t.name, dtype_name(t.type),
                   fmt::format("[{}]", fmt::join(t.ne, t.ne + t.n_dims, ", ")), t.nbytes);
        total += t.nbytes;
        params += static_cast<uint64_t>(t.n_elements());
      }
      fmt::print("\n{} parameters, {} bytes of tensor data ({:.2f} bits per weight)\n", params, total,
                 params ? 8.0 * total / params : 0.0);
    }
    if (f.has(gguf::names::kArchitecture) && !f.tensors().empty()) {
      auto m = model::Model::open(*path);
      if (m.ok()) {
        const model::HParams& hp = (*m)->hparams();
        fmt::print("model: {} layers, n_embd {}, {} heads / {} kv heads, head dim {}, n_ff {}, vocab {}\n",
                   hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.head_dim_k, hp.n_ff, hp.n_vocab);
        if (hp.n_expert > 0) {
          fmt::print("experts: {} routed, {} used per token, expert ff {}{}\n", hp.n_expert, hp.n_expert_used,
                     hp.n_ff_expert,
                     hp.n_ff_shared_expert ? fmt::format(", shared expert ff {}", hp.n_ff_shared_expert) : "");
          fmt::print("active parameters per token: {} of {}\n", (*m)->n_active_params(), (*m)->n_params());
        }
        if (hp.has_recurrent_layers()) {
          const auto n_recurrent = std::count(hp.recurrent.begin(), hp.recurrent.end(), 1);
          fmt::print("layers: {} Gated DeltaNet, {} full attention (conv kernel {}, {} k heads / {} v heads of {})\n",
                     n_recurrent, hp.n_layer - n_recurrent, hp.ssm_conv_kernel, hp.ssm_n_k_heads, hp.ssm_n_v_heads,
                     hp.ssm_state_size);
        }
        if (hp.n_nextn > 0) {
          uint64_t mtp_params = 0;
          for (const auto& t : (*m)->tensors()) mtp_params += t.decl.mtp ? static_cast<uint64_t>(t.info->n_elements()) : 0;
          const Status usable = (*m)->mtp_available();
          fmt::print("multi-token prediction: {} block (blk.{}), {} parameters, {}\n", hp.n_nextn, hp.n_layer, mtp_params,
                     usable.ok() ? "not run by the trunk (a draft model for speculative decoding)"
                                 : usable.error().message);
        }
      } else {
        fmt::print("model: cannot run: {}\n", m.error().message);
      }
    }
    return 0;
  };
}

}  // namespace strata::cli
