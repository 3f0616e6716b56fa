#include "testing/golden.h"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>

#include "testing/shared_data.h"

namespace strata::testing {

Tolerance tolerance_for(const std::string& name, int32_t n_prompt) {
  // The weight type is the last '-' part of the stem (before any ".long"/".ppl" suffix):
  // "qwen35moe-40L-f16" -> f16, "qwen35moe-f32.long" -> f32, "TinyStories-656K-Q8_0" -> q8_0.
  const std::string stem = name.substr(0, name.find('.'));
  std::string type = stem.substr(stem.rfind('-') + 1);
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (stem == "llama-2-tiny-random") return {1e-4, 1e-5};  // logits have std 0.06
  if (type == "bf16") return {0.15, 0.02};
  if (type == "f16") return {0.03, 0.003};
  if (type == "f32" || stem == "stories260K") return {n_prompt > 50 ? 0.05 : 0.03, 0.003};
  return {0.5, 0.06};  // quantized weights, activations quantized as llama.cpp does
}

bool load_golden(const std::string& name, Golden& g) {
  const std::string json_path = shared_file("golden/" + name + ".json");
  if (json_path.empty()) return false;
  g.name = name;
  g.json = nlohmann::json::parse(read_text_file(json_path), nullptr, false);
  if (g.json.is_discarded()) {
    ADD_FAILURE() << "cannot parse " << json_path;
    return false;
  }
  const std::string file = g.json.at("model_file").get<std::string>();
  // The synthetic models live in models/synth/, the downloaded ones in models/.
  const bool synth = std::filesystem::exists(shared_dir() / "models" / "synth" / file);
  g.model_path = shared_file((synth ? "models/synth/" : "models/") + file);
  if (g.model_path.empty()) return false;
  g.prompt_tokens = g.json.at("prompt_tokens").get<std::vector<int32_t>>();
  g.n_vocab = g.json.at("n_vocab").get<int32_t>();
  g.logits = g.json.at("logits_batch").get<std::vector<std::vector<float>>>();
  if (g.json.contains("logits_batch_topk_ids")) {
    g.topk_ids = g.json.at("logits_batch_topk_ids").get<std::vector<std::vector<int32_t>>>();
  }
  g.tolerance = tolerance_for(name, static_cast<int32_t>(g.prompt_tokens.size()));
  return true;
}

}  // namespace strata::testing
