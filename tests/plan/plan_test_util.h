// Helpers for the planner tests: tiny llama GGUF files (zero weights) and node lists.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/architecture.h"
#include "model/model.h"
#include "plan/plan.h"

namespace strata::plan::testing {

inline constexpr const char* kW1 = "127.0.0.1:50052";
inline constexpr const char* kW2 = "127.0.0.1:50053";
inline constexpr uint64_t kGiB = uint64_t{1} << 30;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;

struct TinyLlama {
  int32_t n_layer = 40;
  int32_t n_embd = 64;
  int32_t n_head = 4;
  int32_t n_head_kv = 2;
  int32_t n_ff = 128;
  int32_t n_vocab = 256;
  bool tied = false;  // no output.weight
};

// Writes a llama GGUF with every required tensor (all zeros) and opens it.
inline std::shared_ptr<const model::Model> make_model(const TinyLlama& s, const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() / ("strata_plan_tests_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / (tag + ".gguf")).string();
  model::HParams hp;
  hp.arch = "llama";
  hp.n_layer = s.n_layer;
  hp.n_embd = s.n_embd;
  hp.n_vocab = s.n_vocab;
  hp.n_head = s.n_head;
  hp.n_head_kv = s.n_head_kv;
  hp.head_dim_k = hp.head_dim_v = s.n_embd / s.n_head;
  hp.n_ff = s.n_ff;
  hp.n_rot = hp.head_dim_k;
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "plan test " + tag);
  w.set_u32("llama.block_count", s.n_layer);
  w.set_u32("llama.embedding_length", s.n_embd);
  w.set_u32("llama.context_length", 4096);
  w.set_u32("llama.feed_forward_length", s.n_ff);
  w.set_u32("llama.attention.head_count", s.n_head);
  w.set_u32("llama.attention.head_count_kv", s.n_head_kv);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  for (const model::TensorDecl& d : model::find_architecture("llama")->declare(hp)) {
    if (!d.required && !(d.name == "output.weight" && !s.tied)) continue;
    Status st = w.add_tensor(d.name, DType::F32, d.shape, [](uint8_t* dst, uint64_t n) -> Status {
      std::memset(dst, 0, n);
      return {};
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
  }
  Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.error().message;
  auto m = model::Model::open(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::filesystem::remove(dir, ec);  // only when empty
  return m.ok() ? *m : nullptr;
}

inline Node local(uint64_t memory = 64 * kGiB) {
  Node n;
  n.name = "local";
  n.memory_usable = memory;
  n.threads = 4;
  return n;
}

inline std::vector<Node> two_workers(uint64_t w1 = 64 * kGiB, uint64_t w2 = 64 * kGiB, uint64_t here = 64 * kGiB) {
  return {local(here), worker_node(kW1, w1, 4), worker_node(kW2, w2, 4)};
}

inline Request request(std::vector<double> ts = {}, int32_t ngl = -1) {
  Request r;
  r.n_ctx = 1024;
  r.n_seq = 1;
  r.n_batch = 64;
  r.tensor_split = std::move(ts);
  r.n_gpu_layers = ngl;
  return r;
}

// Owner of each layer, then the output node: "0-10:0 11-39:1 out:1".
inline std::string owners(const Plan& p) {
  std::string s;
  for (const Stage& st : p.stages) {
    s += std::to_string(st.first_layer) + "-" + std::to_string(st.end_layer - 1) + ":" + std::to_string(st.node) + " ";
  }
  return s + "out:" + std::to_string(p.output_node);
}

inline std::string all_text(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

}  // namespace strata::plan::testing
