// Writes the seed corpora that need a GGUF reader or protobuf, one folder per harness under <out>:
//   worker_messages: StageSpecs as a coordinator sends them for a few shared models (whole model, first
//     half, second half with the output head), and ForwardRequests that stories260K's runner accepts
//     (one row, several rows and sequences, a second hop, top_k); each file is the selector byte
//     (0 StageSpec, 1 ForwardRequest) and the message's protobuf encoding;
//   gguf_reader: the models' metadata images and a small GGUF with every value type and a few tensors;
//   chat_template: every shared GGUF's tokenizer.chat_template, alone and with a message content;
//   tokenizer: the vocab test strings (models/vocab/*.inp split at __ggml_vocab_test__), each with a
//     vocab selector byte.
// scripts/fuzz-seeds.sh adds what a shell can make (truncated GGUF headers, OpenAI request bodies).
// Usage: fuzz_seed_writer <out>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/model.h"
#include "net/model_identity.h"
#include "seed_writer.h"
#include "strata.pb.h"

namespace {

namespace fs = std::filesystem;

bool write_seed(const fs::path& dir, const std::string& name, char selector, const google::protobuf::Message& m) {
  return strata::fuzz::write_file(dir / name, std::string(1, selector) + m.SerializeAsString());
}

strata::v1::StageSpec stage_spec(const strata::model::Model& model, const std::vector<uint8_t>& metadata,
                                 int32_t first, int32_t end, bool output) {
  strata::v1::StageSpec spec;
  spec.set_session("fuzz-session");
  spec.set_model_sha256(std::string(64, 'a'));
  spec.set_metadata(metadata.data(), metadata.size());
  for (const auto& t : model.all_infos()) {
    strata::net::to_proto(t, spec.add_all_tensors());
    if (t.name.rfind("blk.", 0) != 0 || first < end) spec.add_stage_tensors(t.name);
  }
  for (int32_t il = first; il < end; ++il) spec.add_owned_layers(il);
  spec.set_output(output);
  spec.set_n_ctx_per_seq(64);
  spec.set_n_seq(2);
  spec.set_n_batch(32);
  spec.set_threads(1);
  return spec;
}

strata::v1::ForwardRequest forward(int32_t n_embd, int32_t n_layer, const std::vector<std::pair<int32_t, int32_t>>& rows,
                                   bool output, uint32_t top_k) {
  strata::v1::ForwardRequest req;
  req.mutable_hop()->set_endpoint("127.0.0.1:1");
  req.mutable_hop()->set_session("fuzz-session");
  req.mutable_hop()->set_first_layer(0);
  req.mutable_hop()->set_end_layer(n_layer);
  req.mutable_hop()->set_output(output);
  std::string want;
  for (const auto& [seq, pos] : rows) {
    req.add_seq(seq);
    req.add_pos(pos);
    want.push_back(1);
  }
  req.set_want_logits(want);
  std::vector<float> hidden(rows.size() * static_cast<size_t>(n_embd));
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  req.set_hidden(hidden.data(), hidden.size() * sizeof(float));
  req.set_top_k(top_k);
  return req;
}

// The worker_messages seeds and the models' metadata images (gguf_reader seeds).
bool write_model_seeds(const fs::path& out) {
  const fs::path worker = out / "worker_messages", gguf = out / "gguf_reader";
  fs::create_directories(worker);
  fs::create_directories(gguf);
  bool ok = true;
  for (const char* name : {"stories260K.gguf", "synth/qwen3-dense-f32.gguf", "synth/qwen35-dense-f32.gguf",
                           "synth/qwen3moe-q4_k_m.gguf"}) {
    auto model = strata::model::Model::open(strata::fuzz::shared_file(std::string("models/") + name));
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, model.error().message.c_str());
      return false;
    }
    auto metadata = strata::net::metadata_image((*model)->file());
    if (!metadata.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, metadata.error().message.c_str());
      return false;
    }
    const int32_t n_layer = (*model)->hparams().n_layer;
    const std::string stem = fs::path(name).stem().string();
    ok &= strata::fuzz::write_file(gguf / ("metadata-" + stem), std::string(metadata->begin(), metadata->end()));
    ok &= write_seed(worker, "stage-" + stem + "-all", 0, stage_spec(**model, *metadata, 0, n_layer, true));
    ok &= write_seed(worker, "stage-" + stem + "-head", 0, stage_spec(**model, *metadata, 0, n_layer / 2, false));
    ok &= write_seed(worker, "stage-" + stem + "-tail", 0, stage_spec(**model, *metadata, n_layer / 2, n_layer, true));
    if (stem == "stories260K") {
      const int32_t E = (*model)->hparams().n_embd;
      ok &= write_seed(worker, "forward-one-row", 1, forward(E, n_layer, {{0, 0}}, true, 0));
      ok &= write_seed(worker, "forward-rows", 1, forward(E, n_layer, {{0, 0}, {0, 1}, {1, 0}, {0, 2}}, true, 4));
      ok &= write_seed(worker, "forward-hidden-only", 1, forward(E, n_layer, {{1, 0}, {1, 1}}, false, 0));
      auto again = forward(E, n_layer, {{0, 0}}, false, 0);
      again.mutable_hop()->set_again(true);
      *again.add_next() = again.hop();
      ok &= write_seed(worker, "forward-again", 1, again);
      // The repeat of a row that never ran here, at position -1 (it used to reach the KV cache).
      auto unrun = forward(E, n_layer, {{0, -1}}, true, 0);
      unrun.mutable_hop()->set_again(true);
      ok &= write_seed(worker, "forward-again-unrun", 1, unrun);
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <out>\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  const bool ok = write_model_seeds(out) && strata::fuzz::write_gguf_seed(out / "gguf_reader") &&
                  strata::fuzz::write_text_seeds(out);
  if (!ok) {
    std::fprintf(stderr, "fuzz_seed_writer: cannot write the seeds under %s\n", out.string().c_str());
    return 1;
  }
  return 0;
}
