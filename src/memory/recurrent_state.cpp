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

uint64_t RecurrentState::bytes_needed(const RecurrentConfig& c) {
  const uint64_t layers = static_cast<uint64_t>(std::count(c.layer_has_state.begin(), c.layer_has_state.end(), 1));
  return sat_mul(layers, uint64_t(std::max(c.n_seq, 0)), bytes_per_layer_seq(c));
}

Result<RecurrentState> RecurrentState::create(const RecurrentConfig& config) {
  if (config.n_seq < 1 || config.conv_rows < 0 || config.conv_channels < 0 || config.n_heads < 0 ||
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

}  // namespace strata::memory
