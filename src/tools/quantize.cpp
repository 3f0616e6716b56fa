// strata quantize: per-tensor type choice (llama.cpp's llama_tensor_get_type for these mixes) and a
// streaming rewrite of the GGUF file.
#include "tools/quantize.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/quantize_weights.h"
#include "tensor/quants.h"

namespace strata::tools {
namespace {

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

DType base_type(QuantType t) {
  switch (t) {
    case QuantType::Q8_0: return DType::Q8_0;
    case QuantType::Q4_0: return DType::Q4_0;
    case QuantType::Q4_K_M: return DType::Q4_K;
    case QuantType::Q5_K_M: return DType::Q5_K;
    case QuantType::Q6_K: return DType::Q6_K;
  }
  return DType::Q8_0;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third one between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool is_quantized_weight(const std::string& name, int n_dims) {
  if (!ends_with(name, "weight") || n_dims < 2) return false;
  for (std::string_view skip : {"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_inp_shexp", "ssm_conv1d.weight",
                                "position_embd", "token_types"}) {
    if (contains(name, skip)) return false;
  }
  return true;
}

int dims_of(const gguf::TensorInfo& t) {
  int n = 1;
  for (int d = 1; d < 4; ++d) {
    if (t.ne[d] > 1) n = d + 1;
  }
  return n;
}

}  // namespace

std::optional<QuantType> quant_type_from_name(std::string_view name) {
  std::string s(name);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "q8_0") return QuantType::Q8_0;
  if (s == "q4_0") return QuantType::Q4_0;
  if (s == "q4_k_m") return QuantType::Q4_K_M;
  if (s == "q5_k_m") return QuantType::Q5_K_M;
  if (s == "q6_k") return QuantType::Q6_K;
  return std::nullopt;
}

std::string_view quant_type_name(QuantType t) {
  switch (t) {
    case QuantType::Q8_0: return "Q8_0";
    case QuantType::Q4_0: return "Q4_0";
    case QuantType::Q4_K_M: return "Q4_K_M";
    case QuantType::Q5_K_M: return "Q5_K_M";
    case QuantType::Q6_K: return "Q6_K";
  }
  return "?";
}

uint32_t quant_file_type(QuantType t) {
  switch (t) {
    case QuantType::Q8_0: return 7;
    case QuantType::Q4_0: return 2;
    case QuantType::Q4_K_M: return 15;
    case QuantType::Q5_K_M: return 17;
    case QuantType::Q6_K: return 18;
  }
  return 0;
}

Result<std::optional<DType>> choose_type(QuantType t, const std::string& name, int64_t ne0, int n_dims,
                                         const TypeContext& ctx, int32_t i_attn_v, int32_t i_ffn_down) {
  if (!is_quantized_weight(name, n_dims)) return std::optional<DType>{};
  const DType base = base_type(t);
  DType type = base;
  const bool k_m = t == QuantType::Q4_K_M || t == QuantType::Q5_K_M;
  if (name == "output.weight" || (!ctx.has_output && name == "token_embd.weight")) {
    if (ne0 % info(base).block_elems != 0) type = DType::Q8_0;
    else if (base != DType::Q8_0) type = DType::Q6_K;
  } else if (name == "token_embd.weight") {
    // keeps the base type for these mixes
  } else if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight")) {
    if (k_m && use_more_bits(i_attn_v, ctx.n_attn_v)) type = DType::Q6_K;
    if (ctx.n_expert == 8) type = DType::Q8_0;
  } else if (contains(name, "attn_k.weight")) {
    if (ctx.n_expert == 8) type = DType::Q8_0;
  } else if (contains(name, "ffn_down")) {
    int layer = i_ffn_down;
    if (ctx.n_expert > 1) {
      if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) {
        return make_error("quantize: cannot determine the layer of tensor '{}'", name);
      }
      if (layer < 0 || layer >= ctx.n_layer) {
        return make_error("quantize: tensor '{}' has layer {}, outside [0, {})", name, layer, ctx.n_layer);
      }
    }
    if (k_m && use_more_bits(layer, ctx.n_layer)) type = DType::Q6_K;
  } else if (contains(name, "attn_output.weight")) {
    if (ctx.n_expert == 8 && t == QuantType::Q4_K_M) type = DType::Q5_K;
  }
  if (ne0 % info(type).block_elems != 0) {
    switch (type) {
      case DType::Q4_K: type = DType::Q5_0; break;
      case DType::Q5_K: type = DType::Q5_1; break;
      case DType::Q6_K: type = DType::Q8_0; break;
      default:
        return make_error("quantize: tensor '{}': rows of {} cannot be quantized to {}", name, ne0, dtype_name(type));
    }
    if (ne0 % info(type).block_elems != 0) type = DType::F16;
  }
  return std::optional<DType>{type};
}

Status quantize_model(const std::string& in, const std::string& out, QuantType qtype, int32_t n_threads,
                      const std::function<void(const QuantizeProgress&)>& progress) {
  STRATA_ASSIGN(std::shared_ptr<const gguf::File> file, gguf::File::open(in));
  STRATA_ASSIGN(const std::string_view arch, file->get_string("general.architecture"));
  TypeContext ctx;
  {
    STRATA_ASSIGN(const int64_t n_layer, file->get_int_or(std::string(arch) + ".block_count", 0));
    STRATA_ASSIGN(const int64_t n_expert, file->get_int_or(std::string(arch) + ".expert_count", 0));
    ctx.n_layer = static_cast<int32_t>(n_layer);
    ctx.n_expert = static_cast<int32_t>(n_expert);
  }
  ctx.has_output = file->find_tensor("output.weight") != nullptr;
  for (const auto& t : file->tensors()) {
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight")) ++ctx.n_attn_v;
  }
  if (n_threads <= 0) n_threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));

  gguf::Writer writer;
  const uint32_t file_type = quant_file_type(qtype);
  // As llama.cpp: every key is copied except the split keys, and the two quantization keys are
  // (re)appended at the end, quantization_version first.
  for (const auto& kv : file->kvs()) {
    if (kv.key == "general.file_type" || kv.key == "general.quantization_version" || kv.key == "split.no" ||
        kv.key == "split.count" || kv.key == "split.tensors.count") {
      continue;
    }
    writer.copy_kv(kv);
  }
  writer.set_u32("general.quantization_version", 2);
  writer.set_u32("general.file_type", file_type);

  // llama.cpp walks (and writes) the tensors ordered by layer number (-1 for non-layer tensors), then
  // name; the attn_v / ffn_down counters depend on that order.
  const size_t count = file->tensors().size();
  std::vector<size_t> order(count);
  std::vector<int> layer_of(count, -1);
  for (size_t i = 0; i < count; ++i) {
    order[i] = i;
    std::sscanf(file->tensors()[i].name.c_str(), "blk.%d.", &layer_of[i]);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (layer_of[a] != layer_of[b]) return layer_of[a] < layer_of[b];
    return file->tensors()[a].name < file->tensors()[b].name;
  });
  int32_t i_attn_v = 0, i_ffn_down = 0;
  for (size_t idx = 0; idx < count; ++idx) {
    const gguf::TensorInfo& t = file->tensors()[order[idx]];
    const int n_dims = dims_of(t);
    STRATA_ASSIGN(const std::optional<DType> chosen, choose_type(qtype, t.name, t.ne[0], n_dims, ctx, i_attn_v, i_ffn_down));
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight")) ++i_attn_v;
    if (is_quantized_weight(t.name, n_dims) && contains(t.name, "ffn_down")) ++i_ffn_down;
    const DType to = chosen.value_or(t.type);
    if (to != t.type && t.type != DType::F32 && t.type != DType::F16 && t.type != DType::BF16) {
      return make_error("quantize: tensor '{}' is {}; only F32, F16 and BF16 tensors can be quantized", t.name,
                        dtype_name(t.type));
    }
    if (!tensor::can_quantize(to)) {
      return make_error("quantize: tensor '{}': cannot produce type {}", t.name, dtype_name(to));
    }
    std::vector<int64_t> ne(t.ne, t.ne + std::max<uint32_t>(1, t.n_dims));
    const DType from = t.type;
    const int64_t row = t.ne[0];
    const int64_t rows = t.n_rows();
    const int threads = n_threads;
    auto fill = [file, &t, from, to, row, rows, threads, idx, count, progress](uint8_t* dst, uint64_t nbytes) -> Status {
      const uint8_t* src = file->tensor_data(t);
      if (from == to) {
        std::copy(src, src + nbytes, dst);
      } else {
        if (nbytes != row_bytes(to, row) * static_cast<uint64_t>(rows)) {
          return make_error("quantize: tensor '{}': size mismatch", t.name);
        }
        const size_t in_row = row_bytes(from, row), out_row = row_bytes(to, row);
        auto work = [&](int64_t r0, int64_t r1) {
          std::vector<float> buf(from == DType::F32 ? 0 : static_cast<size_t>(row));
          for (int64_t r = r0; r < r1; ++r) {
            const uint8_t* s = src + static_cast<size_t>(r) * in_row;
            const float* x;
            if (from == DType::F32) {
              x = reinterpret_cast<const float*>(s);
            } else {
              tensor::dequantize_row(from, s, buf.data(), row);
              x = buf.data();
            }
            tensor::quantize_row(to, x, dst + static_cast<size_t>(r) * out_row, row);
          }
        };
        const int64_t n_workers = std::clamp<int64_t>(std::min<int64_t>(threads, rows / 4), 1, 256);
        if (n_workers == 1) {
          work(0, rows);
        } else {
          std::vector<std::thread> pool;
          const int64_t per = (rows + n_workers - 1) / n_workers;
          for (int64_t w = 0; w < n_workers; ++w) {
            const int64_t r0 = w * per, r1 = std::min(rows, r0 + per);
            if (r0 < r1) pool.emplace_back(work, r0, r1);
          }
          for (auto& th : pool) th.join();
        }
      }
      if (progress) progress(QuantizeProgress{idx + 1, count, t.name, from, to});
      return ok_status();
    };
    STRATA_TRY(writer.add_tensor(t.name, to, std::move(ne), std::move(fill)));
  }
  return writer.write(out);
}

}  // namespace strata::tools
