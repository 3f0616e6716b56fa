#include "plan/shards.h"

#include <algorithm>
#include <cmath>

namespace strata::plan {
namespace {

// n steps over the weights: floor of each share, then the largest remainders get one more.
std::vector<int32_t> apportion(int32_t n, const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  std::vector<int32_t> count(weights.size());
  std::vector<std::pair<double, size_t>> rest;
  int32_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double share = n * weights[i] / total;
    count[i] = static_cast<int32_t>(share);
    given += count[i];
    rest.emplace_back(share - count[i], i);
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < n; ++k, ++given) ++count[rest[k % rest.size()].second];
  return count;
}

std::vector<model::Range> ranges(int32_t total, int32_t unit, const std::vector<double>& weights) {
  if (total <= 0) return std::vector<model::Range>(weights.size());
  const int32_t steps = (total + unit - 1) / unit;
  std::vector<model::Range> out;
  int32_t at = 0;
  for (int32_t c : apportion(steps, weights)) {
    out.push_back({std::min(total, at * unit), std::min(total, (at + c) * unit)});
    at += c;
  }
  return out;
}

}  // namespace

Result<ExpertSplit> parse_expert_split(std::string_view text) {
  if (text == "rows") return ExpertSplit::kRows;
  if (text == "whole") return ExpertSplit::kWhole;
  return make_error("--expert-split '{}': expected rows (each expert cut by rows) or whole (experts handed out whole)", text);
}

std::string_view expert_split_name(ExpertSplit split) { return split == ExpertSplit::kWhole ? "whole" : "rows"; }

Result<std::vector<model::Shard>> split_shards(const model::Model& model, const std::vector<double>& weights, ExpertSplit split) {
  if (weights.size() < 2 || weights.size() > 64) return make_error("tensor split: {} members (2..64)", weights.size());
  for (double w : weights) {
    if (!(w > 0) || !std::isfinite(w)) return make_error("tensor split: member weight {} is not positive", w);
  }
  STRATA_ASSIGN(const model::ShardUnits u, model::shard_units(model));
  const model::HParams& hp = model.hparams();
  if (hp.n_vocab / u.vocab < static_cast<int32_t>(weights.size())) {
    return make_error("tensor split: {} vocabulary rows cannot go round {} members", hp.n_vocab, weights.size());
  }
  const auto kv = ranges(hp.n_head_kv, u.kv_heads, weights), ff = ranges(hp.n_ff, u.ff, weights),
             vocab = ranges(hp.n_vocab, u.vocab, weights), ssm = ranges(hp.ssm_n_k_heads, u.ssm_k_heads, weights),
             shared = ranges(hp.n_ff_shared_expert, u.ff_shared, weights);
  const bool whole = split == ExpertSplit::kWhole && hp.n_expert > 0;
  if (whole && hp.n_expert < static_cast<int32_t>(weights.size())) {
    return make_error("tensor split: {} routed experts cannot go round {} members whole; use --expert-split rows",
                      hp.n_expert, weights.size());
  }
  const auto expert = whole ? std::vector<model::Range>(weights.size(), model::Range{0, hp.n_ff_expert})
                            : ranges(hp.n_ff_expert, u.ff_expert, weights);
  const auto held = whole ? ranges(hp.n_expert, 1, weights) : std::vector<model::Range>(weights.size(), model::Range{0, hp.n_expert});
  std::vector<model::Shard> shards;
  for (size_t i = 0; i < weights.size(); ++i) {
    model::Shard s;
    s.index = static_cast<int32_t>(i);
    s.count = static_cast<int32_t>(weights.size());
    s.kv_heads = kv[i], s.ff = ff[i], s.vocab = vocab[i], s.ssm_k_heads = ssm[i];
    s.ff_expert = expert[i], s.experts = held[i], s.ff_shared = shared[i];
    shards.push_back(s);
  }
  // Every member computes some of the logits: a share too small for one step of rows is refused.
  for (const model::Shard& s : shards) {
    if (s.vocab.size() > 0) continue;
    return make_error("tensor split: member {} gets no vocabulary rows; give it a larger -ts share", s.index);
  }
  return shards;
}

}  // namespace strata::plan
