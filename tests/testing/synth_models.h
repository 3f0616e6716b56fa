// Small synthetic models in a temporary folder and rewritten copies of GGUF files (keys or tensors
// swapped), for the tests of the modules from tools up (the executable links strata_tools).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tools/synth.h"

namespace strata::testing {

// A per-process scratch folder for generated models.
inline std::filesystem::path scratch_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("strata_model_tests_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// A tiny model of `arch` (4 layers, width 64, 4 experts of which 2 used, 2 k / 4 v delta-net heads).
inline tools::SynthSpec tiny_spec(const std::string& arch) {
  tools::SynthSpec s;
  s.arch = arch;
  s.n_layer = 4;
  s.n_embd = 64;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 16;
  s.n_ff = 96;
  s.n_ctx = 512;
  s.rms_eps = 1e-6f;
  s.n_expert = 4;
  s.n_expert_used = 2;
  s.n_ff_expert = 32;
  s.n_ff_shared_expert = 48;
  s.ssm_state = 16;
  s.ssm_k_heads = 2;
  s.ssm_v_heads = 4;
  s.seed = 7;
  return s;
}

inline std::string write_synth(const tools::SynthSpec& spec, const std::string& file) {
  const std::string path = (scratch_dir() / file).string();
  const Status st = tools::write_synth_model(spec, path);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return path;
}

// A copy of `in` with keys left out or added and tensors left out or added.
struct Rewrite {
  std::function<bool(const gguf::KeyValue&)> drop_key = [](const gguf::KeyValue&) { return false; };
  std::function<void(gguf::Writer&)> add_keys = [](gguf::Writer&) {};
  std::function<bool(const gguf::TensorInfo&)> drop_tensor = [](const gguf::TensorInfo&) { return false; };
  std::function<void(gguf::Writer&, const gguf::File&)> add_tensors = [](gguf::Writer&, const gguf::File&) {};
};

inline std::vector<uint8_t> tensor_bytes(const gguf::File& f, const gguf::TensorInfo& t) {
  const uint8_t* p = f.tensor_data(t);
  return {p, p + t.nbytes};
}

inline const gguf::TensorInfo* find_tensor(const gguf::File& f, const std::string& name) {
  for (const auto& t : f.tensors()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

inline std::string rewrite(const std::string& in, const std::string& file, const Rewrite& r) {
  auto src = gguf::File::open(in);
  EXPECT_TRUE(src.ok()) << src.error().message;
  if (!src.ok()) return "";
  const gguf::File& f = **src;
  gguf::Writer w;
  for (const auto& kv : f.kvs()) {
    if (!r.drop_key(kv)) w.copy_kv(kv);
  }
  r.add_keys(w);
  for (const auto& t : f.tensors()) {
    if (r.drop_tensor(t)) continue;
    const Status st = w.add_tensor_bytes(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), tensor_bytes(f, t));
    EXPECT_TRUE(st.ok()) << st.error().message;
  }
  r.add_tensors(w, f);
  const std::string path = (scratch_dir() / file).string();
  const Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return path;
}

}  // namespace strata::testing
