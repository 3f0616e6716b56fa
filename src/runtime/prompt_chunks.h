// A prompt fed in chunks no larger than a batch: the one rule for which tokens a chunk holds, at which
// positions, and which rows ask for logits. Generation::feed (server slots, `strata run`) adds its
// chunks with it; evaluate_prompt and bench's prompt test feed whole prompts with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "base/result.h"
#include "model/batch.h"
#include "text/vocab.h"

namespace strata::runtime {

// Where a prompt's rows go.
struct PromptRows {
  int32_t seq = 0;
  int32_t first_pos = 0;    // the position of prompt[0]
  bool all_logits = false;  // every row asks for logits, not only the prompt's last token's
};

// Adds the prompt's next chunk to the batch (after any rows it holds): prompt[done, done + n) with
// n = min(room, tokens left), token i at position first_pos + i. Only the prompt's last token asks for
// logits, or every token with all_logits. Returns n.
size_t add_prompt_chunk(model::Batch& batch, std::span<const text::Token> prompt, size_t done, size_t room,
                        const PromptRows& rows);

// Feeds the whole prompt in order in chunks of n_batch tokens, the last one holding the rest: each
// chunk alone in the batch handed to decode_chunk. Stops at decode_chunk's first error.
Status feed_prompt_chunks(std::span<const text::Token> prompt, int32_t n_batch, const PromptRows& rows,
                          const std::function<Status(const model::Batch&)>& decode_chunk);

}  // namespace strata::runtime
