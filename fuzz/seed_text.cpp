#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "gguf/gguf.h"
#include "seed_writer.h"

namespace strata::fuzz {

namespace fs = std::filesystem;

bool write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  return static_cast<bool>(out);
}

bool write_gguf_seed(const fs::path& dir) {
  fs::create_directories(dir);
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "fuzz seed");
  w.set_u32("llama.block_count", 2);
  w.set_i32("llama.context_length", -1);
  w.set_u64("general.size", uint64_t{1} << 40);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_i32_array("tokenizer.ggml.token_type", {3, 3, 1, 1, 6});
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.5f, 3.0f, 0.5f});
  w.set_string_array("tokenizer.ggml.tokens", {"<s>", "</s>", "hello", "", "<0x0A>"});
  w.set_u32("general.alignment", 64);
  bool ok = true;
  ok &= w.add_tensor_bytes("token_embd.weight", DType::F32, {4, 2}, std::vector<uint8_t>(32, 1)).ok();
  ok &= w.add_tensor_bytes("blk.0.attn_q.weight", DType::F16, {8, 1}, std::vector<uint8_t>(16, 2)).ok();
  ok &= w.add_tensor_bytes("scalar", DType::F32, {1}, std::vector<uint8_t>(4, 3)).ok();
  auto bytes = w.write_to_memory();
  if (!ok || !bytes.ok()) return false;
  return write_file(dir / "synthetic", std::string(bytes->begin(), bytes->end()));
}

namespace {

std::vector<fs::path> gguf_files() {
  std::vector<fs::path> files;
  const fs::path models = fs::path(shared_file("models"));
  for (const fs::path& dir : {models, models / "vocab"}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".gguf") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The harness splits its input at NUL bytes: template, message content, tools JSON.
bool write_chat_template_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  bool ok = true;
  int n = 0;
  for (const fs::path& path : gguf_files()) {
    auto file = gguf::File::open(path.string());
    if (!file.ok()) continue;
    auto tmpl = (*file)->get_string_or("tokenizer.chat_template", "");
    if (!tmpl.ok() || tmpl->empty()) continue;
    const std::string stem = path.stem().string(), source(*tmpl);
    ok &= write_file(dir / stem, source);
    ok &= write_file(dir / (stem + "-content"), source + std::string(1, '\0') + "Hello <b>{{ world }}</b> \xc3\xa9 \xff");
    ok &= write_file(dir / (stem + "-tools"),
                     source + std::string(1, '\0') + R"({"city": "Paris"})" + std::string(1, '\0') +
                         R"([{"type": "function", "function": {"name": "get_weather", "parameters": )"
                         R"({"type": "object", "properties": {"city": {"type": "string"}}}}}])");
    ++n;
  }
  std::printf("fuzz_seed_writer: %d chat templates\n", n);
  return ok;
}

bool write_tokenizer_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  const std::string separator = "\n__ggml_vocab_test__\n";
  bool ok = true;
  int n = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(shared_file("models/vocab")))) {
    if (entry.path().extension() != ".inp") continue;
    const std::string text = read_file(entry.path());
    for (size_t begin = 0; begin < text.size();) {
      size_t end = text.find(separator, begin);
      if (end == std::string::npos) end = text.size();
      // The selector byte picks the vocab (the harness takes it modulo its vocab count).
      const char selector = static_cast<char>(n % 4);
      ok &= write_file(dir / ("inp-" + std::to_string(n)), std::string(1, selector) + text.substr(begin, end - begin));
      ++n;
      begin = end + separator.size();
    }
  }
  std::printf("fuzz_seed_writer: %d tokenizer strings\n", n);
  return ok;
}

}  // namespace

bool write_text_seeds(const fs::path& out) {
  return write_chat_template_seeds(out / "chat_template") && write_tokenizer_seeds(out / "tokenizer");
}

}  // namespace strata::fuzz
