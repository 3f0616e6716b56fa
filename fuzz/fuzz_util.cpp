#include "fuzz_util.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <spdlog/spdlog.h>

namespace strata::fuzz {

std::string shared_file(const std::string& relative) {
  const char* env = std::getenv("STRATA_SHARED_DIR");
  const std::filesystem::path dir = env && *env ? env : STRATA_SHARED_DIR;
  const std::filesystem::path path = dir / relative;
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "fuzz: %s is missing (set STRATA_SHARED_DIR to the shared data folder)\n",
                 path.string().c_str());
    std::abort();
  }
  return path.string();
}

std::shared_ptr<const text::Vocab> load_vocab(const std::string& relative) {
  const std::string path = shared_file(relative);
  auto file = gguf::File::open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "fuzz: cannot open %s: %s\n", path.c_str(), file.error().message.c_str());
    std::abort();
  }
  auto vocab = text::Vocab::load(**file);
  if (!vocab.ok()) {
    std::fprintf(stderr, "fuzz: cannot load the vocab of %s: %s\n", path.c_str(), vocab.error().message.c_str());
    std::abort();
  }
  return *vocab;
}

void quiet_logs() { spdlog::set_level(spdlog::level::off); }

std::pair<std::string_view, std::string_view> split_once(std::string_view data, std::string_view separator) {
  const size_t at = data.find(separator);
  if (at == std::string_view::npos) return {data, {}};
  return {data.substr(0, at), data.substr(at + separator.size())};
}

}  // namespace strata::fuzz
