// Logits on the wire as each row's k best (id, logit) pairs: the output stage of a pipeline sends
// ~k*8 bytes per row instead of n_vocab*4 (501 KiB for a 128k vocabulary), and the coordinator
// rebuilds rows that sample exactly like the full ones (see sampling::top_candidates).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace strata::net {

// rows x n_vocab logits -> rows x min(k, n_vocab) pairs, best first. A tensor-split member packs its
// vocabulary rows: n_vocab is their count and first_id the token id of the first.
std::string pack_candidates(const float* logits, int64_t rows, int32_t n_vocab, uint32_t k, int32_t first_id = 0);

// The inverse: rows x n_vocab floats, -inf except the candidates. Checks the size and every id
// (the bytes come from another machine).
Result<std::vector<float>> unpack_candidates(const std::string& bytes, int64_t rows, int32_t n_vocab, uint32_t k);

}  // namespace strata::net
