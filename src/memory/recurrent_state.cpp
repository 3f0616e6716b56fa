#include "memory/recurrent_state.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "base/checked.h"

namespace strata::memory {

uint64_t RecurrentState::bytes_per_layer_seq(const RecurrentConfig& c) {
  if (c.conv_rows < 0 || c.conv_channels < 0 || c.n_heads < 0 || c.head_k_dim < 0 || c.head_v_dim < 0) return kSaturated;
  return sat_mul(sat_add(sat_mul(uint64_t(c.conv_rows), uint64_t(c.conv_channels)),
                         sat_mul(uint64_t(c.n_heads), uint64_t(c.head_k_dim), uint64_t(c.head_v_dim))),
                 sizeof(float));
}

namespace {
uint64_t kept_layers(const RecurrentConfig& c) {
  return static_cast<uint64_t>(std::count(c.layer_has_state.begin(), c.layer_has_state.end(), 1));
}
}  // namespace

uint64_t RecurrentState::checkpoint_bytes(const RecurrentConfig& c) {
  return sat_mul(sat_mul(kept_layers(c), uint64_t(std::max(c.n_seq, 0))), uint64_t(std::max(c.n_checkpoints, 0)),
                 bytes_per_layer_seq(c));
}

uint64_t RecurrentState::bytes_needed(const RecurrentConfig& c) {
  return sat_add(sat_mul(kept_layers(c), uint64_t(std::max(c.n_seq, 0)), bytes_per_layer_seq(c)), checkpoint_bytes(c));
}

Result<RecurrentState> RecurrentState::create(const RecurrentConfig& config) {
  if (config.n_seq < 1 || config.n_checkpoints < 0 || config.conv_rows < 0 || config.conv_channels < 0 || config.n_heads < 0 ||
      config.head_k_dim < 0 || config.head_v_dim < 0 ||
      static_cast<int32_t>(config.layer_has_state.size()) != config.n_layer) {
    return make_error("recurrent state: bad configuration (n_seq {}, {} layer flags for {} layers)", config.n_seq,
                      config.layer_has_state.size(), config.n_layer);
  }
  if (bytes_needed(config) > std::numeric_limits<size_t>::max() / 2) {
    return make_error("recurrent state: {} sequences of {} bytes per layer is too large", config.n_seq,
                      bytes_per_layer_seq(config));
  }
  RecurrentState s;
  s.config_ = config;
  s.slot_.assign(config.n_layer, -1);
  int32_t n = 0;
  for (int il = 0; il < config.n_layer; ++il) {
    if (config.layer_has_state[il]) s.slot_[il] = n++;
  }
  const size_t slots = static_cast<size_t>(n) * config.n_seq;
  try {
    s.conv_.assign(slots * s.conv_size(), 0.0f);
    s.ssm_.assign(slots * s.ssm_size(), 0.0f);
  } catch (const std::bad_alloc&) {
    return make_error("recurrent state: cannot allocate {} bytes", bytes_needed(config));
  }
  s.n_past_.assign(config.n_seq, 0);
  s.checkpoints_.resize(config.n_seq);
  s.spare_.resize(config.n_seq);
  s.n_kept_layers_ = n;
  return s;
}

Status RecurrentState::clear(int seq) {
  if (!valid_seq(seq)) return make_error("recurrent state: sequence {} out of range", seq);
  for (int il = 0; il < config_.n_layer; ++il) {
    if (slot_[il] < 0) continue;
    std::fill_n(conv(il, seq), conv_size(), 0.0f);
    std::fill_n(ssm(il, seq), ssm_size(), 0.0f);
  }
  n_past_[seq] = 0;
  checkpoints_[seq].clear();
  spare_[seq].clear();
  return {};
}

Status RecurrentState::remove_from(int seq, int32_t p0) {
  if (!valid_seq(seq)) return make_error("recurrent state: sequence {} out of range", seq);
  if (p0 < 0) return make_error("recurrent state: position {} is negative", p0);
  if (p0 >= n_past_[seq]) return {};
  if (p0 == 0) return clear(seq);
  return make_error(
      "sequence {}: the recurrent state cannot be rolled back to position {} (it has consumed {} tokens); remove from "
      "position 0 to clear the sequence, or from {} or later to keep it",
      seq, p0, n_past_[seq], n_past_[seq]);
}

Status RecurrentState::copy(int src, int dst) {
  if (!valid_seq(src) || !valid_seq(dst)) return make_error("recurrent state: sequence copy {} -> {} out of range", src, dst);
  if (src == dst) return {};
  for (int il = 0; il < config_.n_layer; ++il) {
    if (slot_[il] < 0) continue;
    std::memcpy(conv(il, dst), conv(il, src), conv_size() * sizeof(float));
    std::memcpy(ssm(il, dst), ssm(il, src), ssm_size() * sizeof(float));
  }
  n_past_[dst] = n_past_[src];
  return {};
}

RecurrentState::Checkpoint* RecurrentState::find_checkpoint(int seq, int32_t pos) {
  for (Checkpoint& c : checkpoints_[seq]) {
    if (c.pos == pos) return &c;
  }
  return nullptr;
}

Status RecurrentState::save_checkpoint(int seq) {
  if (!valid_seq(seq)) return make_error("recurrent state: sequence {} out of range", seq);
  Checkpoint* c = find_checkpoint(seq, n_past_[seq]);
  if (!c) {
    if (static_cast<int32_t>(checkpoints_[seq].size()) >= config_.n_checkpoints) {
      return make_error(ErrorCode::kResourceExhausted, "sequence {}: {} state checkpoints are kept already (the most "
                        "planned); drop one first", seq, checkpoints_[seq].size());
    }
    try {
      Checkpoint fresh;
      if (!spare_[seq].empty()) {
        fresh = std::move(spare_[seq].back());
        spare_[seq].pop_back();
      }
      fresh.pos = n_past_[seq];
      fresh.conv.resize(static_cast<size_t>(n_kept_layers_) * conv_size());
      fresh.ssm.resize(static_cast<size_t>(n_kept_layers_) * ssm_size());
      checkpoints_[seq].push_back(std::move(fresh));
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::kResourceExhausted, "sequence {}: cannot allocate a state checkpoint", seq);
    }
    c = &checkpoints_[seq].back();
  }
  copy_out(seq, *c);
  return {};
}

void RecurrentState::copy_out(int seq, Checkpoint& into) const {
  for (int il = 0; il < config_.n_layer; ++il) {
    if (slot_[il] < 0) continue;
    std::memcpy(into.conv.data() + slot_[il] * conv_size(), conv(il, seq), conv_size() * sizeof(float));
    std::memcpy(into.ssm.data() + slot_[il] * ssm_size(), ssm(il, seq), ssm_size() * sizeof(float));
  }
}

void RecurrentState::copy_in(int seq, const Checkpoint& from) {
  for (int il = 0; il < config_.n_layer; ++il) {
    if (slot_[il] < 0) continue;
    std::memcpy(conv(il, seq), from.conv.data() + slot_[il] * conv_size(), conv_size() * sizeof(float));
    std::memcpy(ssm(il, seq), from.ssm.data() + slot_[il] * ssm_size(), ssm_size() * sizeof(float));
  }
  n_past_[seq] = from.pos;
}

Status RecurrentState::restore_checkpoint(int seq, int32_t pos) {
  if (!valid_seq(seq)) return make_error("recurrent state: sequence {} out of range", seq);
  const Checkpoint* c = find_checkpoint(seq, pos);
  if (!c) return make_error(ErrorCode::kNotFound, "sequence {}: no state checkpoint at position {}", seq, pos);
  copy_in(seq, *c);
  return {};
}

Status RecurrentState::drop_checkpoint(int seq, int32_t pos) {
  if (!valid_seq(seq)) return make_error("recurrent state: sequence {} out of range", seq);
  auto& list = checkpoints_[seq];
  const auto dropped = std::stable_partition(list.begin(), list.end(), [&](const Checkpoint& c) { return !(pos < 0 || c.pos == pos); });
  for (auto it = dropped; it != list.end(); ++it) spare_[seq].push_back(std::move(*it));
  list.erase(dropped, list.end());
  return {};
}

std::vector<int32_t> RecurrentState::checkpoint_positions(int seq) const {
  std::vector<int32_t> out;
  if (!valid_seq(seq)) return out;
  for (const Checkpoint& c : checkpoints_[seq]) out.push_back(c.pos);
  return out;
}

uint64_t SeqState::bytes() const {
  uint64_t floats = now.conv.size() + now.ssm.size();
  for (const auto& c : checkpoints) floats += c.conv.size() + c.ssm.size();
  return floats * sizeof(float);
}

Result<SeqState> RecurrentState::save_seq(int seq) const {
  if (!valid_seq(seq)) return make_error("recurrent state: sequence {} out of range", seq);
  SeqState out;
  try {
    out.now.pos = n_past_[seq];
    out.now.conv.resize(static_cast<size_t>(n_kept_layers_) * conv_size());
    out.now.ssm.resize(static_cast<size_t>(n_kept_layers_) * ssm_size());
    out.checkpoints = checkpoints_[seq];
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kResourceExhausted, "sequence {}: cannot copy its recurrent state", seq);
  }
  copy_out(seq, out.now);
  return out;
}

Status RecurrentState::load_seq(int seq, const SeqState& saved) {
  if (!valid_seq(seq)) return make_error("recurrent state: sequence {} out of range", seq);
  STRATA_TRY(fits(saved));
  checkpoints_[seq] = saved.checkpoints;
  spare_[seq].clear();  // the loaded ones may be all the plan counts
  copy_in(seq, saved.now);
  return {};
}

Status RecurrentState::fits(const SeqState& saved) const {
  const size_t conv_n = static_cast<size_t>(n_kept_layers_) * conv_size();
  const size_t ssm_n = static_cast<size_t>(n_kept_layers_) * ssm_size();
  auto fits = [&](const Checkpoint& c) { return c.pos >= 0 && c.conv.size() == conv_n && c.ssm.size() == ssm_n; };
  if (!fits(saved.now) || !std::all_of(saved.checkpoints.begin(), saved.checkpoints.end(), fits) ||
      static_cast<int32_t>(saved.checkpoints.size()) > config_.n_checkpoints) {
    return make_error("the saved recurrent state does not fit this node's layers or checkpoint count");
  }
  return {};
}

}  // namespace strata::memory
