// Model quantization (strata quantize): F32/F16/BF16 GGUF -> llama.cpp's Q8_0, Q4_0, Q4_K_M, Q5_K_M
// and Q6_K mixes, choosing each tensor's type with llama.cpp's rules (llama_tensor_get_type).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/dtype.h"
#include "base/result.h"

namespace strata::tools {

enum class QuantType { Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K };

// Case-insensitive: "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k".
std::optional<QuantType> quant_type_from_name(std::string_view name);
std::string_view quant_type_name(QuantType t);
uint32_t quant_file_type(QuantType t);  // general.file_type (llama_ftype)

// The type llama.cpp gives tensor `name` (row length ne0, n_dims dims) in mix `t`; `layer` is the
// tensor's position among its kind (attn_v or ffn_down) counted over n_layer, has_output whether the
// model has a separate output.weight, n_expert the routed expert count. Unquantized tensors: nullopt.
struct TypeContext {
  int32_t n_layer = 0;
  int32_t n_expert = 0;
  int32_t n_attn_v = 0;  // attn_v / attn_qkv tensors in the model
  bool has_output = true;
};
Result<std::optional<DType>> choose_type(QuantType t, const std::string& name, int64_t ne0, int n_dims,
                                         const TypeContext& ctx, int32_t i_attn_v, int32_t i_ffn_down);

struct QuantizeProgress {
  size_t index = 0;  // 1-based tensor index just written
  size_t count = 0;
  std::string name;
  DType from = DType::F32;
  DType to = DType::F32;
};

// Reads `in` (tensor data mapped, never loaded whole) and writes `out` tensor by tensor. n_threads
// <= 0: hardware concurrency.
Status quantize_model(const std::string& in, const std::string& out, QuantType type, int32_t n_threads = 0,
                      const std::function<void(const QuantizeProgress&)>& progress = {});

}  // namespace strata::tools
