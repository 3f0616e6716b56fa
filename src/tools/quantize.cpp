// strata quantize: per-tensor type choice (llama.cpp's llama_tensor_get_type for these mixes) and a
// streaming rewrite of the GGUF file.
#include "tools/quantize.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "base/system.h"
#include "gguf/gguf.h"
#include "gguf/names.h"
#include "tensor/quantize_weights.h"
#include "tensor/quants.h"
#include "tensor/thread_pool.h"

namespace strata::tools {
namespace names = gguf::names::tensor;
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
  if (name == names::kOutput || (!ctx.has_output && name == names::kTokenEmbd)) {
    if (ne0 % info(base).block_elems != 0) type = DType::Q8_0;
    else if (base != DType::Q8_0) type = DType::Q6_K;
  } else if (name == names::kTokenEmbd) {
    // keeps the base type for these mixes
  } else if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight")) {
    if (k_m && use_more_bits(i_attn_v, ctx.n_attn_v)) type = DType::Q6_K;
    if (ctx.n_expert == 8) type = DType::Q8_0;
  } else if (contains(name, "attn_k.weight")) {
    if (ctx.n_expert == 8) type = DType::Q8_0;
  } else if (contains(name, "ffn_down")) {
    int layer = i_ffn_down;
    if (ctx.n_expert > 1) {
      const auto parsed = gguf::names::parse_layer_tensor(name);
      if (!parsed) return make_error("quantize: cannot determine the layer of tensor '{}'", name);
      layer = parsed->layer;
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

namespace {

// What choose_type needs to know about the whole model.
Result<TypeContext> type_context(const gguf::File& file) {
  STRATA_ASSIGN(const std::string_view arch, file.get_string("general.architecture"));
  STRATA_ASSIGN(const int64_t n_layer, file.get_int_or(std::string(arch) + ".block_count", 0));
  STRATA_ASSIGN(const int64_t n_expert, file.get_int_or(std::string(arch) + ".expert_count", 0));
  TypeContext ctx;
  ctx.n_layer = static_cast<int32_t>(n_layer);
  ctx.n_expert = static_cast<int32_t>(n_expert);
  ctx.has_output = file.find_tensor(std::string(names::kOutput)) != nullptr;
  for (const auto& t : file.tensors()) {
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight")) ++ctx.n_attn_v;
  }
  return ctx;
}

// As llama.cpp: every key is copied except the split keys, and the two quantization keys are
// (re)appended at the end, quantization_version first.
void copy_keys(const gguf::File& file, QuantType qtype, gguf::Writer& writer) {
  for (const auto& kv : file.kvs()) {
    if (kv.key == "general.file_type" || kv.key == "general.quantization_version" || kv.key == "split.no" ||
        kv.key == "split.count" || kv.key == "split.tensors.count") {
      continue;
    }
    writer.copy_kv(kv);
  }
  writer.set_u32("general.quantization_version", 2);
  writer.set_u32("general.file_type", quant_file_type(qtype));
}

// llama.cpp walks (and writes) the tensors ordered by layer number (-1 for non-layer tensors), then
// name; the attn_v / ffn_down counters depend on that order.
std::vector<size_t> llama_order(const gguf::File& file) {
  const size_t count = file.tensors().size();
  std::vector<size_t> order(count);
  std::vector<int> layer_of(count, -1);
  for (size_t i = 0; i < count; ++i) {
    order[i] = i;
    if (const auto parsed = gguf::names::parse_layer_tensor(file.tensors()[i].name)) layer_of[i] = parsed->layer;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (layer_of[a] != layer_of[b]) return layer_of[a] < layer_of[b];
    return file.tensors()[a].name < file.tensors()[b].name;
  });
  return order;
}

// Converts `rows` rows of `row` elements from `from` to `to` on the pool. Each row's bytes depend
// only on that row, so the output is the same for any thread count.
void convert_rows(tensor::ThreadPool& pool, DType from, DType to, const uint8_t* src, uint8_t* dst, int64_t row,
                  int64_t rows) {
  const size_t in_row = row_bytes(from, row), out_row = row_bytes(to, row);
  // Chunks of ~64K elements: enough work per hand-out, and many chunks for large tensors.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(row, 1));
  pool.parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(from == DType::F32 ? 0 : static_cast<size_t>(row));
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* s = src + static_cast<size_t>(r) * in_row;
      const float* x = reinterpret_cast<const float*>(s);
      if (from != DType::F32) {
        tensor::dequantize_row(from, s, buf.data(), row);
        x = buf.data();
      }
      tensor::quantize_row(to, x, dst + static_cast<size_t>(r) * out_row, row);
    }
  });
}

}  // namespace

Status quantize_model(const std::string& in, const std::string& out, QuantType qtype, int32_t n_threads,
                      const std::function<void(const QuantizeProgress&)>& progress) {
  STRATA_ASSIGN(std::shared_ptr<const gguf::File> file, gguf::File::open(in));
  STRATA_ASSIGN(const TypeContext ctx, type_context(*file));
  // The writer calls the fill callbacks from write(), below: the pool outlives them.
  tensor::ThreadPool pool(n_threads > 0 ? n_threads : hardware_threads());
  gguf::Writer writer;
  copy_keys(*file, qtype, writer);

  const std::vector<size_t> order = llama_order(*file);
  const size_t count = order.size();
  int32_t i_attn_v = 0, i_ffn_down = 0;
  for (size_t idx = 0; idx < count; ++idx) {
    const gguf::TensorInfo& t = file->tensors()[order[idx]];
    const int n_dims = dims_of(t);
    STRATA_ASSIGN(const std::optional<DType> chosen, choose_type(qtype, t.name, t.ne[0], n_dims, ctx, i_attn_v, i_ffn_down));
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight")) ++i_attn_v;
    if (is_quantized_weight(t.name, n_dims) && contains(t.name, "ffn_down")) ++i_ffn_down;
    const DType from = t.type, to = chosen.value_or(t.type);
    if (to != from && from != DType::F32 && from != DType::F16 && from != DType::BF16) {
      return make_error(ErrorCode::kInvalidArgument,
                        "quantize: tensor '{}' is {}; only F32, F16 and BF16 tensors can be quantized", t.name,
                        dtype_name(from));
    }
    if (!tensor::can_quantize(to)) {
      return make_error(ErrorCode::kInvalidArgument, "quantize: tensor '{}': cannot produce type {}", t.name,
                        dtype_name(to));
    }
    std::vector<int64_t> ne(t.ne, t.ne + std::max<uint32_t>(1, t.n_dims));
    auto fill = [file, &t, &pool, from, to, idx, count, &progress](uint8_t* dst, uint64_t nbytes) -> Status {
      const uint8_t* src = file->tensor_data(t);
      const int64_t row = t.ne[0], rows = t.n_rows();
      if (from == to) {
        std::copy(src, src + nbytes, dst);
      } else if (nbytes != row_bytes(to, row) * static_cast<uint64_t>(rows)) {
        return make_error(ErrorCode::kInternal, "quantize: tensor '{}': size mismatch", t.name);
      } else {
        convert_rows(pool, from, to, src, dst, row, rows);
      }
      if (progress) progress(QuantizeProgress{idx + 1, count, t.name, from, to});
      return ok_status();
    };
    STRATA_TRY(writer.add_tensor(t.name, to, std::move(ne), std::move(fill)));
  }
  return writer.write(out);
}

}  // namespace strata::tools
