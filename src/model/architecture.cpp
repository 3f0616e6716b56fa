#include "model/architecture.h"

namespace strata::model {

// Defined in the per-architecture files.
const Architecture& llama_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();
const Architecture& qwen3moe_architecture();
const Architecture& qwen35_architecture();
const Architecture& qwen35moe_architecture();
const Architecture& qwen3next_architecture();

const Architecture* find_architecture(std::string_view arch) {
  for (const Architecture* a : {&llama_architecture(), &qwen2_architecture(), &qwen3_architecture(),
                                &qwen3moe_architecture(), &qwen35_architecture(), &qwen35moe_architecture(),
                                &qwen3next_architecture()}) {
    if (a->name() == arch) return a;
  }
  return nullptr;
}

}  // namespace strata::model
