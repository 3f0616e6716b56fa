// -sm tensor: every member of the tensor group holds a slice of every layer (model::Shard) and runs
// it; the group adds its partial sums after each attention and FFN sub-layer. The planner picks the
// group and each member's share (-ts, else usable memory), cuts the slices on the steps the weight
// types allow (model::shard_units) and says where a shape could not be cut evenly.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "gguf/names.h"
#include "plan/internal.h"

namespace strata::plan::detail {
namespace {

struct Group {
  std::vector<int32_t> members;  // node indices, in node order
  std::vector<double> weights;   // their shares
  std::string flag_text;         // "-ts 1,1", "usable memory" or "-ts auto"
  bool by_memory = false;        // no -ts (or all zero): shares from usable memory
};

// -ts with W + 1 values weighs this machine first; with W values only the workers (this machine then
// embeds, samples and merges the members' logits, like llama.cpp's client over RPC servers). Without
// -ts (or all zero), every node by its usable memory.
Result<Group> choose_group(const std::vector<Node>& nodes, const Request& request) {
  const size_t n = nodes.size(), workers = n - 1;
  const std::vector<double>& ts = request.tensor_split;
  const bool all_zero = std::all_of(ts.begin(), ts.end(), [](double v) { return v == 0; });
  std::vector<double> share(n, 0.0);
  Group g;
  if (!ts.empty() && !all_zero) {
    if (ts.size() != workers && ts.size() != n) {
      return make_error("plan: -ts has {} values; -sm tensor with {} worker(s) takes {} (the workers) or {} (this "
                        "machine first)", ts.size(), workers, workers, n);
    }
    std::copy(ts.begin(), ts.end(), share.begin() + (ts.size() == workers ? 1 : 0));
    g.flag_text = "-ts " + join_values(ts);
  } else {
    for (size_t i = 0; i < n; ++i) {
      share[i] = nodes[i].memory_usable == kUnlimited ? 1.0 : static_cast<double>(nodes[i].memory_usable);
    }
    g.flag_text = "usable memory";
    g.by_memory = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (share[i] > 0) g.members.push_back(static_cast<int32_t>(i)), g.weights.push_back(share[i]);
  }
  if (g.members.size() < 2) {
    return make_error("plan: -sm tensor needs at least two nodes with a share ({} gives {}); add --rpc workers or "
                      "give them a -ts share", g.flag_text, g.members.size());
  }
  return g;
}

// -ts auto: every node, weighed by its speed on this model.
Group speed_group(const model::Model& model, const std::vector<Node>& nodes, const Request& request) {
  Group g;
  const std::vector<double> shares = speed_shares(model, nodes, request);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (shares[i] > 0) g.members.push_back(static_cast<int32_t>(i)), g.weights.push_back(shares[i]);
  }
  g.flag_text = "-ts auto";
  return g;
}

// -ts auto: shrinks the share of every member over its memory (by what it needs over what it has,
// and a little more) for the next try; false when every member fits.
bool shrink_overfull(const std::vector<Node>& nodes, const std::vector<NodeBytes>& bytes, Group& g) {
  bool changed = false;
  for (size_t i = 0; i < g.members.size(); ++i) {
    const int32_t m = g.members[i];
    if (bytes[m].total() <= nodes[m].memory_usable) continue;
    g.weights[i] *= 0.97 * static_cast<double>(nodes[m].memory_usable) / static_cast<double>(bytes[m].total());
    changed = true;
  }
  return changed;
}

std::string range_text(model::Range r, int32_t total) {
  if (r.size() == 0) return "none";
  return fmt::format("{}-{} of {}", r.begin, r.end - 1, total);
}

// A member's slices in words, the dimensions this model has.
std::string slice_text(const model::HParams& hp, const model::Shard& s) {
  std::string t = "KV heads " + range_text(s.kv_heads, hp.n_head_kv);
  if (hp.ssm_n_k_heads > 0) {
    const int32_t r = hp.ssm_n_v_heads / hp.ssm_n_k_heads;
    t += fmt::format(", DeltaNet key heads {} (with {} value heads)", range_text(s.ssm_k_heads, hp.ssm_n_k_heads),
                     r * s.ssm_k_heads.size());
  }
  if (hp.n_ff > 0 && hp.n_expert == 0) t += ", FFN rows " + range_text(s.ff, hp.n_ff);
  if (model::holds_whole_experts(hp, s)) t += ", whole experts " + range_text(s.experts, hp.n_expert);
  else if (hp.n_expert > 0) t += fmt::format(", rows {} of each of the {} experts", range_text(s.ff_expert, hp.n_ff_expert), hp.n_expert);
  if (hp.n_ff_shared_expert > 0) t += ", shared expert rows " + range_text(s.ff_shared, hp.n_ff_shared_expert);
  return t + ", vocabulary rows " + range_text(s.vocab, hp.n_vocab);
}

// Where a dimension left a member without a slice: which steps forced it.
void note_empty_slices(const model::Model& model, const model::ShardUnits& u, const std::vector<Node>& nodes,
                       const Group& g, const std::vector<model::Shard>& shards, std::vector<std::string>& warnings) {
  const model::HParams& hp = model.hparams();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string who = node_label(nodes, g.members[i]);
    if (shards[i].kv_heads.size() == 0) {
      warnings.push_back(fmt::format(
          "-sm tensor: attention is cut in steps of {} KV head(s) (attn_output's quant blocks must stay whole); with "
          "{} KV heads over {} members, {} holds no attention heads and adds zeros to the attention sums",
          u.kv_heads, hp.n_head_kv, shards.size(), who));
    }
    if (hp.n_ff > 0 && hp.n_expert == 0 && shards[i].ff.size() == 0) {
      warnings.push_back(fmt::format("-sm tensor: the FFN is cut in steps of {} rows; {} gets none of the {}", u.ff, who,
                                     hp.n_ff));
    }
    if (hp.ssm_n_k_heads > 0 && shards[i].ssm_k_heads.size() == 0) {
      warnings.push_back(fmt::format("-sm tensor: the DeltaNet is cut in steps of {} key heads (ssm_out's quant blocks "
                                     "must stay whole); {} holds none of the {} and adds zeros to its sums",
                                     u.ssm_k_heads, who, hp.ssm_n_k_heads));
    }
  }
}

// Each member's slice stage; nodes outside the group hold nothing (the coordinator still embeds).
std::vector<model::StageConfig> tensor_stages(const model::Model& model, const std::vector<Node>& nodes,
                                              const Request& request, const Group& g,
                                              const std::vector<model::Shard>& shards) {
  const int32_t n_layer = model.hparams().n_layer;
  std::vector<model::StageConfig> stages;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const auto it = std::find(g.members.begin(), g.members.end(), static_cast<int32_t>(n));
    const bool member = it != g.members.end();
    StageRole role;
    role.owned.assign(static_cast<size_t>(n_layer), member ? 1 : 0);
    role.input = n == 0;
    role.output = member;
    role.mtp = request.mtp && member && n == 0;  // whole on this machine, which has every row's token and hidden state
    if (member) role.shard = shards[static_cast<size_t>(it - g.members.begin())];
    stages.push_back(make_stage(model, nodes[n], request, std::move(role)));
  }
  return stages;
}

// Whole experts dealt to the members in proportion to their rows of each expert, and a token's k
// experts picked uniformly at random: the expected count the busiest member runs (a multivariate
// hypergeometric, enumerated; k is small). A row split runs k x (its share) on every member.
double busiest_whole_expert_count(const std::vector<int32_t>& held, int32_t k) {
  int32_t total = 0;
  for (int32_t h : held) total += h;
  const auto choose = [](int32_t n, int32_t r) {
    double c = 1;
    for (int32_t i = 0; i < r; ++i) c = c * (n - i) / (i + 1);
    return r < 0 || r > n ? 0.0 : c;
  };
  const std::function<double(size_t, int32_t, int32_t)> walk = [&](size_t m, int32_t left, int32_t busiest) -> double {
    if (m + 1 == held.size()) return choose(held[m], left) * std::max(busiest, left);
    double sum = 0;
    for (int32_t x = 0; x <= std::min(left, held[m]); ++x) sum += choose(held[m], x) * walk(m + 1, left - x, std::max(busiest, x));
    return sum;
  };
  return walk(0, k, 0) / choose(total, k);
}

// Why the routed experts are cut as they are, in numbers: the busiest member's expected share of a
// token's experts with whole experts against the rows' even share.
std::string expert_split_why(const model::HParams& hp, const std::vector<model::Shard>& shards, ExpertSplit split) {
  const bool whole = split == ExpertSplit::kWhole;
  std::vector<int32_t> held;
  double busiest_rows = 0;
  for (const model::Shard& s : shards) {
    held.push_back(whole ? s.experts.size()
                         : static_cast<int32_t>(std::lround(double(hp.n_expert) * s.ff_expert.size() / hp.n_ff_expert)));
    busiest_rows = std::max(busiest_rows, double(hp.n_expert_used) * (whole ? double(s.experts.size()) / hp.n_expert
                                                                            : double(s.ff_expert.size()) / hp.n_ff_expert));
  }
  const double busiest = busiest_whole_expert_count(held, hp.n_expert_used);
  const double ratio = busiest_rows > 0 ? busiest / busiest_rows : 0.0;
  if (whole) {
    return fmt::format("routed experts are handed out whole (--expert-split whole): the busiest member runs {:.2f} of a "
                       "token's {} experts on average (uniform routing), {:.2f}x its even share of {:.2f}; on the "
                       "A3B shape over two nodes this decoded slower than rows of every expert (bench/README.md)",
                       busiest, hp.n_expert_used, ratio, busiest_rows);
  }
  return fmt::format("each routed expert is cut by rows (--expert-split rows, the default): with whole experts the busiest "
                     "member would run {:.2f} of a token's {} experts on average (uniform routing), {:.2f}x the {:.2f} "
                     "expert-equivalents its rows cost every token; measured on the A3B shape over two nodes, rows "
                     "decoded faster (bench/README.md)",
                     busiest, hp.n_expert_used, ratio, busiest_rows);
}

// Per token: the embeddings out to every worker member, two sums per layer between every two
// members, and each worker member's logits (its vocabulary rows) back.
void add_exchanges(Plan& p, const model::HParams& hp) {
  const uint64_t row = uint64_t(hp.n_embd) * sizeof(float);
  const std::vector<int32_t>& m = p.tensor_group;
  for (int32_t w : m) {
    if (w != p.input_node) p.transfers.push_back({p.input_node, w, "embeddings (input of layer 0)", row});
  }
  for (int32_t a : m) {
    for (int32_t b : m) {
      if (a == b) continue;
      p.transfers.push_back({a, b,
                             fmt::format("partial sums: 2 per layer x {} layers = {} exchanges of {} floats",
                                         hp.n_layer, 2 * hp.n_layer, hp.n_embd),
                             2 * uint64_t(hp.n_layer) * row});
    }
  }
  for (int32_t w : m) {
    if (w == p.input_node) continue;
    const model::Range v = p.node_stages[w].shard.vocab;
    p.transfers.push_back({w, p.input_node, "logits", uint64_t(v.size()) * sizeof(float)});
  }
}

// The flags -sm tensor cannot honour: no workers, -ot pins, an -ngl that keeps layers off the workers.
Status check_tensor_flags(const std::vector<Node>& nodes, const Request& request, int32_t n_layer) {
  if (nodes.size() < 2) return make_error("plan: -sm tensor splits every layer over several nodes; give workers with --rpc");
  if (!request.overrides.empty()) {
    return make_error("plan: -ot pins whole tensors to nodes, but -sm tensor slices every tensor over the group; drop "
                      "-ot or use -sm layer");
  }
  if (request.n_gpu_layers >= 0 && request.n_gpu_layers < n_layer + 1) {
    return make_error("plan: -ngl {} keeps layers off the workers, but -sm tensor slices all {} layers (and the output) "
                      "over the group; drop -ngl or give -ngl {}", request.n_gpu_layers, n_layer, n_layer + 1);
  }
  return {};
}

// The group's slices and what they cost.
struct Slices {
  std::vector<model::Shard> shards;        // per member
  std::vector<model::StageConfig> stages;  // per node
  std::vector<NodeBytes> bytes;            // per node
};

// Cuts the slices for the group's shares; -ts auto shrinks the shares of members over their memory
// and cuts again (at most 8 times).
Result<Slices> cut_slices(const model::Model& model, const std::vector<Node>& nodes, const Request& request,
                          bool by_speed, Group& g) {
  Slices cut;
  for (int attempt = 0;; ++attempt) {
    STRATA_ASSIGN(cut.shards, split_shards(model, g.weights, request.expert_split));
    cut.stages = tensor_stages(model, nodes, request, g, cut.shards);
    cut.bytes = node_bytes(model, cut.stages);
    if (!by_speed || attempt == 8 || !shrink_overfull(nodes, cut.bytes, g)) break;
  }
  return cut;
}

// Weight bytes a stage reads per token when it holds a slice (0 otherwise).
uint64_t slice_read_per_token(const model::Model& model, const model::StageConfig& stage) {
  uint64_t read = 0;
  for (const auto& [type, b] : read_per_token(model, stage, true)) read = sat_add(read, b);
  return stage.shard.split() ? read : 0;
}

// Every member runs every layer on its slice; the first member computes the output, this machine embeds.
Plan tensor_layout(const model::Model& model, std::vector<Node> nodes, const Group& g,
                   std::vector<model::StageConfig> stages, std::vector<NodeBytes> bytes) {
  const int32_t n_layer = model.hparams().n_layer;
  Plan p;
  p.nodes = std::move(nodes);
  p.split_mode = SplitMode::kTensor;
  p.tensor_group = g.members;
  p.layer_owner.assign(static_cast<size_t>(n_layer), g.members.front());
  p.input_node = 0;
  p.output_node = g.members.front();
  for (int32_t m : g.members) p.stages.push_back({m, 0, n_layer});
  p.node_stages = std::move(stages);
  p.bytes = std::move(bytes);
  for (const model::StageConfig& st : p.node_stages) p.read_per_token.push_back(slice_read_per_token(model, st));
  for (const model::Model::Tensor& t : model.tensors()) p.tensor_home[t.decl.name] = t.decl.layer < 0 ? 0 : p.output_node;
  add_exchanges(p, model.hparams());
  return p;
}

// Per node, its slices in words (empty outside the group).
std::vector<std::string> member_slices(const model::HParams& hp, size_t n_nodes, const Group& g,
                                       const std::vector<model::Shard>& shards) {
  std::vector<std::string> slices(n_nodes, "");
  for (size_t i = 0; i < g.members.size(); ++i) slices[g.members[i]] = slice_text(hp, shards[i]);
  return slices;
}

// The decision: who holds which slices, and why the routed experts are cut as they are.
Decision tensor_split_decision(const model::HParams& hp, const Plan& p, const Group& g,
                               const std::vector<model::Shard>& shards, const Request& request) {
  Decision d;
  d.kind = Decision::Kind::kTensorSplit;
  d.flags = g.flag_text;
  for (size_t i = 0; i < g.members.size(); ++i) {
    d.detail += fmt::format("{}{} ({})", i ? ", " : "", node_label(p.nodes, g.members[i]), p.slices[g.members[i]]);
  }
  if (hp.n_expert > 0 && hp.n_expert_used > 0 && hp.n_expert_used <= 64) d.why = expert_split_why(hp, shards, request.expert_split);
  d.all_zero_split = !request.tensor_split.empty() && g.by_memory;
  d.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int32_t il = 0; il < hp.n_layer; ++il) d.layers[il] = il;
  return d;
}

void warn_nodes_without_share(Plan& p, const Group& g) {
  for (size_t n = 1; n < p.nodes.size(); ++n) {
    if (std::find(g.members.begin(), g.members.end(), static_cast<int32_t>(n)) == g.members.end()) {
      p.warnings.push_back(fmt::format("{} has no -ts share: it holds nothing and runs nothing", node_label(p.nodes, static_cast<int32_t>(n))));
    }
  }
}

// Refuses, naming every node over its limit, a group whose slices do not fit.
Status check_tensor_fit(const Plan& p) {
  std::string over;
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    if (p.bytes[n].total() <= p.nodes[n].memory_usable) continue;
    over += fmt::format("{}{} needs {} but its limit is {}", over.empty() ? "" : "; ", node_label(p.nodes, static_cast<int32_t>(n)),
                        human_bytes(p.bytes[n].total()), human_bytes(p.nodes[n].memory_usable));
  }
  if (over.empty()) return {};
  return with_code(make_error("plan: -sm tensor does not fit in memory: {}. Fix: give the fuller nodes a smaller -ts "
                              "share, add nodes (--rpc) or lower the context (-c)", over),
                   ErrorCode::kResourceExhausted);
}

}  // namespace

Result<Plan> make_tensor_plan(const model::Model& model, std::vector<Node> nodes, const Request& request) {
  const model::HParams& hp = model.hparams();
  STRATA_TRY(check_tensor_flags(nodes, request, hp.n_layer));
  STRATA_ASSIGN(Group g, choose_group(nodes, request));
  const bool by_speed = auto_split(request) && speeds_known(nodes);
  if (by_speed) g = speed_group(model, nodes, request);
  if (request.mtp && g.members.front() != 0) {
    return make_error("plan: --spec-type draft-mtp under -sm tensor drafts on this machine, but {} gives it no share; "
                      "give -ts {} values (this machine first)", g.flag_text, nodes.size());
  }
  STRATA_ASSIGN(const model::ShardUnits units, model::shard_units(model));
  STRATA_ASSIGN(Slices cut, cut_slices(model, nodes, request, by_speed, g));

  Plan p = tensor_layout(model, std::move(nodes), g, std::move(cut.stages), std::move(cut.bytes));
  p.slices = member_slices(hp, p.nodes.size(), g, cut.shards);
  p.decisions.push_back(tensor_split_decision(hp, p, g, cut.shards, request));
  note_empty_slices(model, units, p.nodes, g, cut.shards, p.warnings);
  warn_nodes_without_share(p, g);
  STRATA_TRY(check_tensor_fit(p));
  predict(model, request, !by_speed && !g.by_memory, p);
  if (by_speed && !p.predicted_ms.empty()) {
    Decision& split = p.decisions.back();
    split.why += fmt::format("{}the shares make every member's predicted time per token equal within memory ({})",
                             split.why.empty() ? "" : "; ", predicted_times(p));
  }
  return p;
}

}  // namespace strata::plan::detail
