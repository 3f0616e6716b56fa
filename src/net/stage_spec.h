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
// 4: tensor split (StageSpec.shard, JoinMesh).
// 5: a tensor-split member without the file receives only its slices (PrepareReply.slices).
// 6: routed experts may be held whole (ShardSpec.expert_begin/end).
// 7: a tensor group led by the coordinator runs its batches over the data links (MeshSpec.steps_over_link).
inline constexpr uint32_t kProtocolVersion = 11;

struct ParsedStage {
  std::string session;
  std::string model_sha256;
  std::shared_ptr<const gguf::File> metadata;
  std::vector<gguf::TensorInfo> all_tensors;
  std::map<std::string, gguf::TensorInfo> stage_tensors;
  model::StageConfig config;  // as the coordinator's plan gave it (config.tensors: the stage tensors)
  model::StageBytes bytes;    // model::stage_bytes of config: what the admission check compares
  std::set<std::string> forward_to;  // the only endpoints this stage may forward hidden states to
  std::string mesh_secret;           // tensor split: the load's link secret (net::link_key)
  // Tensor split: the stage tensors this member reads only part of, and which bytes (the rest whole).
  std::map<std::string, model::SliceBytes> slices;
  const model::SliceBytes& slice_of(const std::string& name) const;
};

// Validates every field: ids, hash format, metadata, tensor shapes, layer indices, sizes. The stage
// runs on spec.threads() threads, or `default_threads` when the spec leaves it to the worker.
Result<ParsedStage> parse_stage(const v1::StageSpec& spec, int32_t default_threads);

// Maps the stage's weights (from a local copy of the model or the cache) and allocates its memory.
Result<std::unique_ptr<model::StageRunner>> load_stage_runner(const ParsedStage& stage, const std::string& local_path,
                                                              const TensorStore& store);

// The batch rows of a Forward request, checked against the runner's shape.
Result<model::Batch> batch_from_request(const v1::ForwardRequest& req, const model::StageRunner& runner);

// A stage as the spec a worker receives. `metadata` is metadata_image(model file).
v1::StageSpec to_stage_spec(const model::Model& model, const model::StageConfig& stage, const std::string& session,
                            const std::string& model_sha256, const std::vector<uint8_t>& metadata,
                            const std::vector<std::string>& forward_to, const std::string& mesh_secret = {});
// What the plan gives `node` (plan.node_stages[node]), as a spec for that worker. `metadata` is
// metadata_image(model file).
v1::StageSpec make_stage_spec(const model::Model& model, const plan::Plan& plan, int32_t node,
                              const std::string& session, const std::string& model_sha256,
                              const std::vector<uint8_t>& metadata);

}  // namespace strata::net
