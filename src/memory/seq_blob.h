// A stashed sequence (its KV rows, recurrent state and checkpoints) as bytes, so a node can hand its
// share of a saved slot to the coordinator and take it back from a file: little-endian, every length
// before its data. decode reads only what the bytes hold: each length is checked against what is
// left before anything is allocated.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/result.h"
#include "memory/kv_cache.h"
#include "memory/recurrent_state.h"

namespace strata::memory {

struct SeqBlob {
  KvRows kv;
  std::optional<SeqState> state;
};

std::vector<uint8_t> encode_seq(const SeqBlob& blob);
Result<SeqBlob> decode_seq(std::span<const uint8_t> bytes);

}  // namespace strata::memory
