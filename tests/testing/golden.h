// Golden llama.cpp outputs (../shared/golden/*.json) and the tolerances of ../shared/golden/README.md.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace strata::testing {

struct Tolerance {
  double max_abs;
  double mean_abs;
};

struct Golden {
  std::string name;        // file stem, e.g. "llama-dense-q4_k_m"
  std::string model_path;  // absolute
  nlohmann::json json;
  std::vector<int32_t> prompt_tokens;
  int32_t n_vocab = 0;
  // Row i: the golden logits at prompt position i; when topk_ids is non-empty, only at those ids.
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<int32_t>> topk_ids;
  Tolerance tolerance{};
};

// Loads golden/<name>.json and resolves its model; false (with a test failure) when missing.
bool load_golden(const std::string& name, Golden& out);

// The README's tolerance for the model's weight type (named in the file stem) and prompt length.
Tolerance tolerance_for(const std::string& name, int32_t n_prompt);

}  // namespace strata::testing
