#include "model/architecture.h"

#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace strata::model {

// Defined in the per-architecture files, src/model/<arch>.cpp.
const Architecture& llama_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();
const Architecture& qwen3moe_architecture();
const Architecture& qwen35_architecture();
const Architecture& qwen35moe_architecture();
const Architecture& qwen3next_architecture();

namespace {

// The registry: the one list of the architectures this build runs. Adding one is a new <arch>.cpp and
// a line here.
constexpr std::array kRegistry = {&llama_architecture,  &qwen2_architecture,    &qwen3_architecture,
                                  &qwen3moe_architecture, &qwen35_architecture, &qwen35moe_architecture,
                                  &qwen3next_architecture};

}  // namespace

std::span<const Architecture* const> architectures() {
  static const std::array<const Architecture*, kRegistry.size()> all = [] {
    std::array<const Architecture*, kRegistry.size()> out{};
    for (size_t i = 0; i < kRegistry.size(); ++i) out[i] = &kRegistry[i]();
    return out;
  }();
  return all;
}

const Architecture* find_architecture(std::string_view arch) {
  for (const Architecture* a : architectures()) {
    if (a->name() == arch) return a;
  }
  return nullptr;
}

Result<const Architecture*> require_architecture(std::string_view arch) {
  if (const Architecture* a = find_architecture(arch)) return a;
  std::vector<std::string_view> known;
  for (const Architecture* a : architectures()) known.push_back(a->name());
  return make_error("architecture '{}' is not supported (supported: {})", arch, fmt::join(known, ", "));
}

const ArchTraits* find_arch_traits(std::string_view arch) {
  const Architecture* a = find_architecture(arch);
  return a ? &a->traits() : nullptr;
}

}  // namespace strata::model
