// Helpers the harnesses share: where the shared test data is, loading a vocab or a model once, and
// splitting one fuzz input into parts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "text/vocab.h"

namespace strata::fuzz {

// Absolute path of `relative` under the shared data folder: $STRATA_SHARED_DIR if set, else the
// folder the build was configured with. Aborts with a message when the file is missing, since a
// harness without its model would only fuzz the error path.
std::string shared_file(const std::string& relative);

// Opens a GGUF under shared/ and loads its vocabulary; aborts on failure.
std::shared_ptr<const text::Vocab> load_vocab(const std::string& relative);

// Turns Strata's logging off: messages for rejected inputs would only slow the fuzzer down.
void quiet_logs();

// Splits `data` at the first occurrence of `separator`: the part before it, and the rest (empty when
// the separator does not occur).
std::pair<std::string_view, std::string_view> split_once(std::string_view data, std::string_view separator);

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace strata::fuzz
