// text::Vocab on arbitrary text. The first byte picks the vocabulary: SentencePiece (stories260K),
// byte-level BPE (gpt-2, qwen3) or WordPiece (bert-bge), all loaded once; the rest is the text.
// It is tokenized with parse_special off and on, and the tokens are turned back into text with every
// detokenize flag and token by token. The input's bytes read as token ids (in range or not) are
// detokenized as well.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_util.h"
#include "text/vocab.h"

namespace {

const std::vector<std::shared_ptr<const strata::text::Vocab>>& vocabs() {
  static const std::vector<std::shared_ptr<const strata::text::Vocab>> v = {
      strata::fuzz::load_vocab("models/stories260K.gguf"),
      strata::fuzz::load_vocab("models/vocab/ggml-vocab-gpt-2.gguf"),
      strata::fuzz::load_vocab("models/vocab/ggml-vocab-qwen3.gguf"),
      strata::fuzz::load_vocab("models/vocab/ggml-vocab-bert-bge.gguf"),
  };
  return v;
}

volatile size_t g_sink;

void back_to_text(const strata::text::Vocab& vocab, const std::vector<strata::text::Token>& tokens) {
  size_t n = 0;
  for (int flags = 0; flags < 4; ++flags) n += vocab.detokenize(tokens, flags & 1, flags & 2).size();
  strata::text::Utf8Stream stream;
  for (strata::text::Token t : tokens) {
    n += vocab.token_to_piece(t, false).size();
    n += stream.push(vocab.token_to_piece(t, true)).size();
    n += vocab.token_text(t).size() + static_cast<size_t>(vocab.token_type(t)) + vocab.is_eog(t);
  }
  n += stream.flush().size();
  g_sink = g_sink + n;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  strata::fuzz::quiet_logs();
  (void)vocabs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& all = vocabs();
  const strata::text::Vocab& vocab = *all[data[0] % all.size()];
  const std::string_view text = strata::fuzz::as_text(data + 1, size - 1);
  for (bool parse_special : {false, true}) {
    const auto tokens = vocab.tokenize(text, parse_special, parse_special);
    for (strata::text::Token t : tokens) {
      if (t < 0 || t >= vocab.n_tokens()) __builtin_trap();  // tokenize only returns real ids
    }
    back_to_text(vocab, tokens);
  }
  std::vector<strata::text::Token> ids((size - 1) / sizeof(strata::text::Token));
  if (!ids.empty()) std::memcpy(ids.data(), data + 1, ids.size() * sizeof(strata::text::Token));
  back_to_text(vocab, ids);
  return 0;
}
