// Parts of fuzz_seed_writer (seed_writer.cpp has the model-based seeds, seed_text.cpp the rest).
#pragma once

#include <filesystem>
#include <string>

namespace strata::fuzz {

bool write_file(const std::filesystem::path& path, const std::string& bytes);
// A small valid GGUF with a key of every value type, arrays, and a few tensors, into `dir`.
bool write_gguf_seed(const std::filesystem::path& dir);
// chat_template seeds (the shared GGUFs' templates) and tokenizer seeds (the vocab test strings).
bool write_text_seeds(const std::filesystem::path& out);

}  // namespace strata::fuzz
