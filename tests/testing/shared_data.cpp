#include "testing/shared_data.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace strata::testing {

std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("STRATA_SHARED_DIR"); env && *env) return env;
  return STRATA_SHARED_DIR;
}

std::string shared_file(const std::string& relative) {
  const auto path = shared_dir() / relative;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "shared test data missing: " << path.string()
                  << " (tests expect ../shared beside the checkout, or STRATA_SHARED_DIR)";
    return "";
  }
  return std::filesystem::absolute(path).lexically_normal().string();
}

std::string strata_binary() { return STRATA_BINARY; }

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path.string();
    return "";
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace strata::testing
