// What a worker does with the messages it receives. The first byte picks the message, the rest is its
// protobuf encoding:
//   even: a v1::StageSpec (Prepare/Load) -> net::parse_stage;
//   odd:  a v1::ForwardRequest -> net::batch_from_request, StageRunner::validate and, as Forward does
//         for a valid batch, run_layers and the logits, on a StageRunner holding every layer of
//         stories260K (created once; its sequences are cleared after each input).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "fuzz_util.h"
#include "model/model.h"
#include "model/stage_runner.h"
#include "net/stage_spec.h"

namespace {

constexpr int32_t kSeqs = 2;

strata::model::StageRunner& runner() {
  static const std::unique_ptr<strata::model::StageRunner> r = [] {
    const std::string path = strata::fuzz::shared_file("models/stories260K.gguf");
    auto model = strata::model::Model::open(path);
    if (!model.ok()) {
      std::fprintf(stderr, "fuzz: %s: %s\n", path.c_str(), model.error().message.c_str());
      std::abort();
    }
    strata::model::StageConfig config;
    config.owned.assign((*model)->hparams().n_layer, 1);
    config.input = true;
    config.output = true;
    config.n_seq = kSeqs;
    config.n_ctx_per_seq = 32;
    config.n_batch = 16;
    config.tensors = strata::model::tensors_needed(**model, config.owned, true, true);
    auto created = strata::model::StageRunner::create(*model, config);
    if (!created.ok()) {
      std::fprintf(stderr, "fuzz: stage runner: %s\n", created.error().message.c_str());
      std::abort();
    }
    return std::move(created).value();
  }();
  return *r;
}

void stage_spec(const uint8_t* data, size_t size) {
  strata::v1::StageSpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return;
  auto stage = strata::net::parse_stage(spec, 1);
  if (!stage.ok()) return;
  // A parsed stage is self-consistent: every stage tensor is one of all_tensors, one flag per layer.
  if (stage->metadata == nullptr) __builtin_trap();
}

void forward(const uint8_t* data, size_t size) {
  strata::v1::ForwardRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return;
  strata::model::StageRunner& r = runner();
  auto batch = strata::net::batch_from_request(req, r);
  if (!batch.ok()) return;
  if (!r.validate(*batch, false, req.hop().again()).ok()) return;
  std::vector<float> hidden(req.hidden().size() / sizeof(float));
  std::memcpy(hidden.data(), req.hidden().data(), req.hidden().size());
  if (r.run_layers(*batch, req.hop().first_layer(), req.hop().end_layer(), hidden.data()).ok() && req.hop().output()) {
    (void)r.logits(*batch, hidden.data());
  }
  for (int32_t s = 0; s < kSeqs; ++s) (void)r.clear_seq(s);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  strata::fuzz::quiet_logs();
  // Invalid UTF-8 in string fields is rejected by ParseFromArray with a log line per input.
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  (void)runner();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    stage_spec(data + 1, size - 1);
  } else {
    forward(data + 1, size - 1);
  }
  return 0;
}
