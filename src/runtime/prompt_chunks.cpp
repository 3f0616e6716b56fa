#include "runtime/prompt_chunks.h"

#include <algorithm>

namespace strata::runtime {

size_t add_prompt_chunk(model::Batch& batch, std::span<const text::Token> prompt, size_t done, size_t room,
                        const PromptRows& rows) {
  const size_t n = std::min(room, prompt.size() - std::min(done, prompt.size()));
  for (size_t i = done; i < done + n; ++i) {
    batch.add(prompt[i], rows.first_pos + static_cast<int32_t>(i), rows.seq, rows.all_logits || i + 1 == prompt.size());
  }
  return n;
}

Status feed_prompt_chunks(std::span<const text::Token> prompt, int32_t n_batch, const PromptRows& rows,
                          const std::function<Status(const model::Batch&)>& decode_chunk) {
  if (n_batch < 1) return make_error("a batch of {} tokens holds no prompt", n_batch);
  model::Batch batch;
  for (size_t done = 0; done < prompt.size();) {
    batch.clear();
    done += add_prompt_chunk(batch, prompt, done, static_cast<size_t>(n_batch), rows);
    STRATA_TRY(decode_chunk(batch));
  }
  return {};
}

}  // namespace strata::runtime
