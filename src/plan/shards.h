// -sm tensor's placement rule: which member of a tensor group holds which slice (model::Shard) of
// every layer, from the members' shares, on the steps the weight types allow (model::shard_units).
#pragma once

#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/model.h"
#include "model/shard.h"

namespace strata::plan {

// How routed experts are cut: rows of every expert (every member runs all of a token's experts, a
// share of each) or whole experts (a member runs only the token's experts it holds, all of each).
enum class ExpertSplit { kRows, kWhole };
Result<ExpertSplit> parse_expert_split(std::string_view text);  // "rows" | "whole"
std::string_view expert_split_name(ExpertSplit split);

// Shards of `weights.size()` members (each weight > 0): each dimension's steps go to the members in
// proportion to their weights (largest remainder, ties to the earlier member), in member order. A
// member may get no KV heads or FFN rows when there are fewer steps than members; every member gets
// vocabulary rows (and, with whole experts, at least one expert).
Result<std::vector<model::Shard>> split_shards(const model::Model& model, const std::vector<double>& weights,
                                               ExpertSplit experts = ExpertSplit::kRows);

}  // namespace strata::plan
