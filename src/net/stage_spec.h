// The stage a coordinator asks a worker to hold, as sent (StageSpec) and as validated on arrival.
#pragma once

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/stage_runner.h"
#include "net/tensor_store.h"
#include "plan/plan.h"
#include "strata.pb.h"

namespace strata::net {

// 3: every request is a client stream; StageSpec names the endpoints a worker may forward to.
inline constexpr uint32_t kProtocolVersion = 3;

struct ParsedStage {
  std::string session;
  std::string model_sha256;
  std::shared_ptr<const gguf::File> metadata;
  std::vector<gguf::TensorInfo> all_tensors;
  std::map<std::string, gguf::TensorInfo> stage_tensors;
  std::vector<uint8_t> owned;  // per layer
  bool output = false;
  int32_t n_ctx_per_seq = 0, n_seq = 0, n_batch = 0;
  uint64_t weight_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t state_bytes = 0;  // recurrent state of the owned linear-attention layers
  std::set<std::string> forward_to;  // the only endpoints this stage may forward hidden states to
};

// Validates every field: ids, hash format, metadata, tensor shapes, layer indices, sizes.
Result<ParsedStage> parse_stage(const v1::StageSpec& spec);

// Maps the stage's weights (from a local copy of the model or the cache) and allocates its memory.
Result<std::unique_ptr<model::StageRunner>> load_stage_runner(const ParsedStage& stage, const std::string& local_path,
                                                              const TensorStore& store, int32_t threads);

// The batch rows of a Forward request, checked against the runner's shape.
Result<model::Batch> batch_from_request(const v1::ForwardRequest& req, const model::StageRunner& runner);

// What the plan gives `node`, as a spec for that worker. `metadata` is metadata_image(model file).
v1::StageSpec make_stage_spec(const model::Model& model, const plan::Plan& plan, int32_t node,
                              const std::string& session, const std::string& model_sha256,
                              const std::vector<uint8_t>& metadata, const plan::Request& request, int32_t threads);

}  // namespace strata::net
