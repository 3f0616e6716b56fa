#include "net/stage_spec.h"

#include <algorithm>
#include <cstring>

#include "base/checked.h"
#include "base/system.h"
#include "gguf/names.h"
#include "memory/kv_cache.h"
#include "net/model_identity.h"

namespace strata::net {
namespace {

// Bounds on what one session may hold (a worker keeps at most --max-sessions of them).
constexpr size_t kMaxMetadataBytes = 4 << 20;
constexpr int kMaxTensors = 100000;
constexpr int kMaxForwardTargets = 256;

bool is_hex_sha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A cache type field: empty (a coordinator that predates the field) is f16; anything else must be a
// type this worker caches in, whose blocks fit the model's heads.
Result<DType> spec_cache_type(const char* field, const std::string& name, int32_t head_dim) {
  if (name.empty()) return DType::F16;
  auto type = memory::parse_kv_type(name);
  if (!type.ok()) return make_error("{}: {}", field, type.error().message);
  if (head_dim % info(*type).block_elems != 0) {
    return make_error("{} {}: the model's head_dim {} is not a multiple of the type's {}-element blocks", field, name,
                      head_dim, info(*type).block_elems);
  }
  return *type;
}

// The ranges must lie inside the model; check_shard checks the steps once the tensors are at hand.
Result<model::Shard> parse_shard(const v1::ShardSpec& s, const model::HParams& hp) {
  if (s.count() < 2 || s.count() > 64 || s.index() < 0 || s.index() >= s.count()) {
    return make_error("shard {} of {} out of range (2..64 members)", s.index(), s.count());
  }
  const auto range = [](const char* what, int32_t b, int32_t e, int32_t total) -> Result<model::Range> {
    if (b < 0 || e < b || e > total) return make_error("shard {} [{}, {}) outside [0, {})", what, b, e, total);
    return model::Range{b, e};
  };
  model::Shard shard;
  shard.index = s.index();
  shard.count = s.count();
  STRATA_ASSIGN(shard.kv_heads, range("KV heads", s.kv_head_begin(), s.kv_head_end(), hp.n_head_kv));
  STRATA_ASSIGN(shard.ff, range("FFN rows", s.ff_begin(), s.ff_end(), hp.n_ff));
  STRATA_ASSIGN(shard.vocab, range("vocabulary rows", s.vocab_begin(), s.vocab_end(), hp.n_vocab));
  STRATA_ASSIGN(shard.ssm_k_heads, range("DeltaNet key heads", s.ssm_k_head_begin(), s.ssm_k_head_end(), hp.ssm_n_k_heads));
  STRATA_ASSIGN(shard.ff_expert, range("expert rows", s.ff_expert_begin(), s.ff_expert_end(), hp.n_ff_expert));
  STRATA_ASSIGN(shard.ff_shared, range("shared expert rows", s.ff_shared_begin(), s.ff_shared_end(), hp.n_ff_shared_expert));
  STRATA_ASSIGN(shard.experts, range("routed experts", s.expert_begin(), s.expert_end(), hp.n_expert));
  return shard;
}

// The stage's identity: the session it belongs to and the model's hash.
Status parse_identity(const v1::StageSpec& spec, ParsedStage& p) {
  if (spec.session().empty() || spec.session().size() > 128) return make_error("session id must be 1..128 bytes");
  p.session = spec.session();
  if (!is_hex_sha256(spec.model_sha256())) return make_error("model_sha256 must be 64 lowercase hex digits");
  p.model_sha256 = spec.model_sha256();
  return ok_status();
}

// The model's GGUF metadata, its size bounded before it is copied and parsed.
Result<std::shared_ptr<const gguf::File>> parse_metadata(const std::string& metadata) {
  if (metadata.size() > kMaxMetadataBytes) {
    return make_error("metadata of {} bytes is too large (at most {})", metadata.size(), kMaxMetadataBytes);
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(metadata.data());
  return gguf::File::from_bytes({bytes, metadata.size()}, "metadata from coordinator");
}

// Every tensor of the model (into `all_tensors`, in the spec's order), by name; the count is bounded
// before any is converted, and no name may appear twice.
Result<std::map<std::string, gguf::TensorInfo>> parse_model_tensors(const v1::StageSpec& spec,
                                                                    std::vector<gguf::TensorInfo>& all_tensors) {
  if (spec.all_tensors_size() > kMaxTensors) return make_error("{} tensors is too many", spec.all_tensors_size());
  std::map<std::string, gguf::TensorInfo> by_name;
  for (const v1::TensorSpec& t : spec.all_tensors()) {
    STRATA_ASSIGN(gguf::TensorInfo info, from_proto(t));
    if (!by_name.emplace(info.name, info).second) return make_error("tensor '{}' listed twice", info.name);
    all_tensors.push_back(std::move(info));
  }
  return by_name;
}

// The tensors this stage holds: each a tensor of the model, each once (also listed in config.tensors).
Status parse_stage_tensors(const v1::StageSpec& spec, const std::map<std::string, gguf::TensorInfo>& by_name,
                           ParsedStage& p) {
  for (const std::string& name : spec.stage_tensors()) {
    auto it = by_name.find(name);
    if (it == by_name.end()) return make_error("stage tensor '{}' is not a tensor of the model", name);
    if (!p.stage_tensors.emplace(name, it->second).second) return make_error("stage tensor '{}' listed twice", name);
    p.config.tensors.push_back(name);
  }
  return ok_status();
}

// The only endpoints this stage may forward hidden states to, each one host:port.
Result<std::set<std::string>> parse_forward_targets(const v1::StageSpec& spec) {
  if (spec.forward_to_size() > kMaxForwardTargets) return make_error("{} forward targets is too many", spec.forward_to_size());
  std::set<std::string> targets;
  for (const std::string& endpoint : spec.forward_to()) {
    auto parsed = plan::parse_rpc_list(endpoint);
    if (endpoint.size() > 255 || !parsed.ok() || parsed->size() != 1) {
      return make_error("forward target '{}' is not a host:port", endpoint.substr(0, 64));
    }
    targets.insert(endpoint);
  }
  return targets;
}

// The layers, batch and context the plan gave this stage, then model::check_stage on them: nothing is
// sized from them before that check.
Status fill_stage_shape(const v1::StageSpec& spec, const model::HParams& hp, int32_t default_threads,
                        model::StageConfig& c) {
  c.owned.assign(hp.n_layer, 0);
  for (int32_t il : spec.owned_layers()) {
    if (il < 0 || il >= hp.n_layer) return make_error("owned layer {} out of range [0, {})", il, hp.n_layer);
    c.owned[il] = 1;
  }
  c.output = spec.output();
  c.mtp = spec.mtp();  // StageRunner::create refuses it without the output head
  c.repack = spec.repack();  // the planner's choice from this worker's Hello; StageRunner::create checks it
  c.n_checkpoints = spec.n_checkpoints();
  c.n_seq = spec.n_seq();
  c.n_ctx_per_seq = spec.n_ctx_per_seq();
  c.n_batch = spec.n_batch();
  c.n_threads = spec.threads() == 0 ? std::max(1, default_threads) : spec.threads();  // 0: the worker's own
  return model::check_stage(c, hp);
}

// The host prompt cache's cap and the KV cache's types.
Status fill_cache_settings(const v1::StageSpec& spec, const model::HParams& hp, model::StageConfig& c) {
  // The host prompt cache is a cap, not a reservation: this worker never holds more than a quarter of
  // the memory it has free when the stage arrives, whatever the coordinator asks.
  c.cache_ram_bytes = std::min<uint64_t>(spec.cache_ram_bytes(), read_memory_facts().available / 4);
  STRATA_ASSIGN(c.type_k, spec_cache_type("cache_type_k", spec.cache_type_k(), hp.head_dim_k));
  STRATA_ASSIGN(c.type_v, spec_cache_type("cache_type_v", spec.cache_type_v(), hp.head_dim_v));
  return ok_status();
}

// Tensor split (a shard of more than one member): this member's ranges and the load's link secret.
Status parse_tensor_split(const v1::StageSpec& spec, const model::HParams& hp, ParsedStage& p) {
  if (!spec.has_shard() || spec.shard().count() <= 1) return ok_status();
  STRATA_ASSIGN(p.config.shard, parse_shard(spec.shard(), hp));
  if (spec.mesh_secret().size() != 32) return make_error("mesh_secret must be 32 bytes");
  p.mesh_secret = spec.mesh_secret();
  return ok_status();
}

// What the worker will hold of each stage tensor (a tensor-split member: its slice), by its
// declaration; records the partial slices in p.slices.
uint64_t held_weight_bytes(const model::Architecture& arch, const model::HParams& hp, ParsedStage& p) {
  const model::StageConfig& c = p.config;
  std::map<std::string, model::TensorDecl> decls;
  for (model::TensorDecl& d : arch.declare(hp)) decls.emplace(d.name, std::move(d));
  uint64_t weight_bytes = 0;
  for (const auto& [name, info] : p.stage_tensors) {
    auto d = decls.find(name);
    if (d == decls.end()) {
      weight_bytes = sat_add(weight_bytes, model::held_bytes(info, c.repack));
      continue;
    }
    model::SliceBytes slice = model::shard_slice_bytes(hp, d->second, info, c.shard, c.input);
    weight_bytes = sat_add(weight_bytes, model::held_slice_bytes(info, slice, c.repack));
    if (!slice.whole) p.slices.emplace(name, std::move(slice));
  }
  return weight_bytes;
}

}  // namespace

const model::SliceBytes& ParsedStage::slice_of(const std::string& name) const {
  static const model::SliceBytes kWhole;
  auto it = slices.find(name);
  return it == slices.end() ? kWhole : it->second;
}

Result<ParsedStage> parse_stage(const v1::StageSpec& spec, int32_t default_threads) {
  ParsedStage p;
  STRATA_TRY(parse_identity(spec, p));
  STRATA_ASSIGN(p.metadata, parse_metadata(spec.metadata()));
  STRATA_ASSIGN(const auto by_name, parse_model_tensors(spec, p.all_tensors));
  STRATA_TRY(parse_stage_tensors(spec, by_name, p));
  STRATA_ASSIGN(p.forward_to, parse_forward_targets(spec));
  const auto embd = by_name.find(std::string(gguf::names::tensor::kTokenEmbd));
  STRATA_ASSIGN(model::HParams hp, model::load_hparams(*p.metadata, embd == by_name.end() ? nullptr : &embd->second));
  STRATA_TRY(fill_stage_shape(spec, hp, default_threads, p.config));  // checked before anything is sized from it
  STRATA_TRY(fill_cache_settings(spec, hp, p.config));
  const model::Architecture* arch = model::find_architecture(hp.arch);
  if (!arch) return make_error("architecture '{}' is not supported by this worker", hp.arch);
  STRATA_TRY(parse_tensor_split(spec, hp, p));
  const uint64_t weight_bytes = held_weight_bytes(*arch, hp, p);
  p.bytes = model::stage_bytes(hp, *arch, p.config, weight_bytes);
  return p;
}

Result<std::unique_ptr<model::StageRunner>> load_stage_runner(const ParsedStage& stage, const std::string& local_path,
                                                              const TensorStore& store) {
  std::shared_ptr<const model::Model> model;
  if (!local_path.empty()) {
    STRATA_ASSIGN(model, model::Model::open(local_path));
  } else {
    std::vector<std::shared_ptr<const void>> keep_alive;
    std::map<std::string, const uint8_t*> data;
    for (const auto& [name, info] : stage.stage_tensors) {
      STRATA_ASSIGN(std::shared_ptr<const MappedFile> mapped, store.map_cached(stage.model_sha256, info, stage.slice_of(name)));
      data[name] = mapped->data();
      keep_alive.push_back(mapped);
    }
    STRATA_ASSIGN(model, model::Model::assemble(
                             stage.metadata, stage.all_tensors,
                             [&](const gguf::TensorInfo& t) -> const uint8_t* {
                               auto it = data.find(t.name);
                               return it == data.end() ? nullptr : it->second;
                             },
                             std::move(keep_alive)));
  }
  return model::StageRunner::create(std::move(model), stage.config);
}

Result<model::Batch> batch_from_request(const v1::ForwardRequest& req, const model::StageRunner& runner) {
  const int64_t rows = req.pos_size();
  const int64_t E = runner.model().hparams().n_embd;
  if (rows < 1 || rows > runner.config().n_batch) return make_error("{} rows out of range 1..{}", rows, runner.config().n_batch);
  if (req.seq_size() != rows || static_cast<int64_t>(req.want_logits().size()) != rows) {
    return make_error("pos, seq and want_logits differ in length");
  }
  if (req.hidden().size() != static_cast<size_t>(rows * E) * sizeof(float)) {
    return make_error("hidden state has {} bytes, expected {} rows x {} floats", req.hidden().size(), rows, E);
  }
  if (req.tokens_size() != 0 && req.tokens_size() != rows) return make_error("tokens and pos differ in length");
  const int32_t n_vocab = runner.model().hparams().n_vocab;
  model::Batch b;
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t token = req.tokens_size() ? req.tokens(static_cast<int>(i)) : 0;
    if (token < 0 || token >= n_vocab) return make_error("token id {} out of range [0, {})", token, n_vocab);
    b.add(token, req.pos(i), req.seq(i), req.want_logits()[i] != 0);
  }
  return b;
}

v1::StageSpec to_stage_spec(const model::Model& model, const model::StageConfig& stage, const std::string& session,
                            const std::string& model_sha256, const std::vector<uint8_t>& metadata,
                            const std::vector<std::string>& forward_to, const std::string& mesh_secret) {
  v1::StageSpec spec;
  spec.set_session(session);
  spec.set_model_sha256(model_sha256);
  spec.set_metadata(metadata.data(), metadata.size());
  for (const gguf::TensorInfo& t : model.all_infos()) to_proto(t, spec.add_all_tensors());
  for (const std::string& name : stage.tensors) spec.add_stage_tensors(name);
  for (size_t il = 0; il < stage.owned.size(); ++il) {
    if (stage.owned[il]) spec.add_owned_layers(static_cast<int32_t>(il));
  }
  spec.set_output(stage.output);
  spec.set_mtp(stage.mtp);
  spec.set_repack(stage.repack);
  spec.set_n_seq(stage.n_seq);
  spec.set_n_ctx_per_seq(stage.n_ctx_per_seq);
  spec.set_n_batch(stage.n_batch);
  spec.set_threads(stage.n_threads);
  spec.set_n_checkpoints(stage.n_checkpoints);
  spec.set_cache_ram_bytes(stage.cache_ram_bytes);
  spec.set_cache_type_k(memory::kv_type_name(stage.type_k));
  spec.set_cache_type_v(memory::kv_type_name(stage.type_v));
  for (const std::string& endpoint : forward_to) spec.add_forward_to(endpoint);
  if (stage.shard.split()) {
    v1::ShardSpec* s = spec.mutable_shard();
    s->set_index(stage.shard.index);
    s->set_count(stage.shard.count);
    s->set_kv_head_begin(stage.shard.kv_heads.begin);
    s->set_kv_head_end(stage.shard.kv_heads.end);
    s->set_ff_begin(stage.shard.ff.begin);
    s->set_ff_end(stage.shard.ff.end);
    s->set_vocab_begin(stage.shard.vocab.begin);
    s->set_vocab_end(stage.shard.vocab.end);
    s->set_ssm_k_head_begin(stage.shard.ssm_k_heads.begin);
    s->set_ssm_k_head_end(stage.shard.ssm_k_heads.end);
    s->set_ff_expert_begin(stage.shard.ff_expert.begin);
    s->set_ff_expert_end(stage.shard.ff_expert.end);
    s->set_ff_shared_begin(stage.shard.ff_shared.begin);
    s->set_ff_shared_end(stage.shard.ff_shared.end);
    s->set_expert_begin(stage.shard.experts.begin);
    s->set_expert_end(stage.shard.experts.end);
    spec.set_mesh_secret(mesh_secret);
  }
  return spec;
}

v1::StageSpec make_stage_spec(const model::Model& model, const plan::Plan& plan, int32_t node,
                              const std::string& session, const std::string& model_sha256,
                              const std::vector<uint8_t>& metadata) {
  std::vector<std::string> forward_to;
  for (size_t n = 1; n < plan.nodes.size(); ++n) {
    if (static_cast<int32_t>(n) != node) forward_to.push_back(plan.nodes[n].endpoint);
  }
  return to_stage_spec(model, plan.node_stages.at(static_cast<size_t>(node)), session, model_sha256, metadata,
                       forward_to);
}

}  // namespace strata::net
