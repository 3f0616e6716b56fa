#include "gguf/names.h"

#include <charconv>

namespace strata::gguf::names {

std::string arch_key(std::string_view arch, std::string_view key) {
  std::string s;
  s.reserve(arch.size() + 1 + key.size());
  s.append(arch).append(".").append(key);
  return s;
}

std::string layer_prefix(int il) {
  std::string s(kLayerPrefix);
  s.append(std::to_string(il)).append(".");
  return s;
}

std::string layer_tensor(int il, std::string_view base, std::string_view suffix) {
  std::string s = layer_prefix(il);
  s.append(base);
  if (!suffix.empty()) s.append(".").append(suffix);
  return s;
}

std::optional<LayerTensorName> parse_layer_tensor(std::string_view name) {
  if (!name.starts_with(kLayerPrefix)) return std::nullopt;
  name.remove_prefix(kLayerPrefix.size());
  if (name.empty() || name[0] < '0' || name[0] > '9') return std::nullopt;  // from_chars takes a sign
  int layer = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  const size_t digits = static_cast<size_t>(end - name.data());
  // Canonical numbers only ("blk.07." is not layer 7), then a dot and a non-empty base.
  if (ec != std::errc() || layer < 0 || (digits > 1 && name[0] == '0')) return std::nullopt;
  if (digits + 1 >= name.size() || name[digits] != '.') return std::nullopt;
  const std::string_view rest = name.substr(digits + 1);
  const size_t dot = rest.rfind('.');
  if (dot == std::string_view::npos) return LayerTensorName{layer, rest, {}};
  if (dot == 0 || dot + 1 == rest.size()) return std::nullopt;
  return LayerTensorName{layer, rest.substr(0, dot), rest.substr(dot + 1)};
}

}  // namespace strata::gguf::names
