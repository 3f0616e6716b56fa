// Round trips over the test-vector strings, arbitrary bytes (invalid UTF-8 included), streaming UTF-8
// output, and load errors for unsupported tokenizers.
#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <thread>

#include "test_vocab.h"

namespace strata::text {
namespace {

using testing_util::load_shared_vocab;
using testing_util::split_inp;

std::vector<std::string> shared_inp_cases() {
  const std::string path = ::strata::testing::shared_file("models/vocab/ggml-vocab-gpt-2.gguf.inp");
  if (path.empty()) return {};
  return split_inp(::strata::testing::read_text_file(path));
}

// True when llama.cpp's clean_up_tokenization_spaces would change the text.
bool clean_up_would_change(const std::string& s) {
  for (const char* p : {" ?", " !", " .", " ,", " '"}) {
    if (s.find(p) != std::string::npos) return true;
  }
  return false;
}

// detokenize(tokenize(s)) == s wherever llama.cpp gives that: byte-level BPE and SPM are lossless, except
// that BPE vocabs with clean_spaces rewrite " ?", " 's" and the like.
TEST(RoundTrip, TestVectorStringsComeBackUnchanged) {
  const auto cases = shared_inp_cases();
  ASSERT_FALSE(cases.empty());
  struct Entry {
    const char* gguf;
    bool clean_spaces;
    bool spm = false;
  };
  const Entry entries[] = {
      {"models/vocab/ggml-vocab-llama-spm.gguf", false, true}, {"models/vocab/ggml-vocab-phi-3.gguf", false, true},
      {"models/vocab/ggml-vocab-qwen3.gguf", false},     {"models/vocab/ggml-vocab-deepseek-llm.gguf", false},
      {"models/vocab/ggml-vocab-deepseek-coder.gguf", false}, {"models/vocab/ggml-vocab-gpt-2.gguf", true},
      {"models/vocab/ggml-vocab-falcon.gguf", true},     {"models/vocab/ggml-vocab-mpt.gguf", true},
      {"models/vocab/ggml-vocab-refact.gguf", true},     {"models/vocab/ggml-vocab-starcoder.gguf", true},
  };
  for (const Entry& e : entries) {
    const auto vocab = load_shared_vocab(e.gguf);
    ASSERT_NE(vocab, nullptr) << e.gguf;
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string& s = cases[i];
      if (e.clean_spaces && clean_up_would_change(s)) continue;
      EXPECT_EQ(vocab->detokenize(vocab->tokenize(s, false, false), false, false), s) << e.gguf << " case " << i;
      // With BOS added and removed again (SPM then keeps the space prefix, as llama_detokenize does).
      const std::string with_bos = e.spm && !s.empty() ? " " + s : s;
      EXPECT_EQ(vocab->detokenize(vocab->tokenize(s, true, false), true, false), with_bos) << e.gguf << " case " << i;
    }
  }
}

std::vector<std::string> nasty_inputs() {
  std::vector<std::string> inputs = {
      "\xFF",          "\xC0\x80",          "\xED\xA0\x80",     "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80",
      "\xE2\x82",      "\x80\x80\x80",      "a\xFF b\xFE",      std::string(1, '\0'), std::string("x\0y", 3),
      "\xE2\x96\x81",  "<|im_start|>\xFF",  "  \xC3\n\n\t \xA9", "\xF0\x9F\x98",     "'s'S'\xC3",
  };
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> length(0, 48);
  for (int n = 0; n < 300; ++n) {
    std::string s;
    const int len = length(rng);
    for (int i = 0; i < len; ++i) s += static_cast<char>(byte(rng));
    inputs.push_back(std::move(s));
  }
  // Random mixes of special-token texts, whitespace runs, multi-byte characters and stray bytes.
  const char* pool[] = {"<|im_start|>", "<|im_end|>", "<s>", "</s>", "<think>", "<|endoftext|>", "<unk>", "[UNK]",
                        "<|user|>", "<0x0A>", " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", "'s", "'LL", "Hello",
                        "world", "123", "4567", "\xC3\xA9", "\xF0\x9F\x98\x81", "\xE6\x88\x91", "\xE2\x96\x81",
                        "\xFF", "\xC3", "\xED\xA0\x80", ".", "!!", "...", "\xE1\x9E\x80", "\xCC\x81"};
  std::uniform_int_distribution<size_t> pick(0, std::size(pool) - 1);
  for (int n = 0; n < 300; ++n) {
    std::string s;
    const int len = length(rng);
    for (int i = 0; i < len; ++i) s += pool[pick(rng)];
    inputs.push_back(std::move(s));
  }
  inputs.push_back(std::string(5000, ' ') + "x" + std::string(5000, '\n'));
  inputs.push_back(std::string(20000, '9'));
  return inputs;
}

// llama.cpp's reading of arbitrary bytes: each byte that starts no valid sequence is U+FFFD.
std::string lenient_utf8(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cpt = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80;
      cpt = (cpt << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    }
    if (!ok || cpt > 0x10FFFF) {
      out += "\xEF\xBF\xBD";
      i += ok ? len : 1;
      continue;
    }
    // Re-encode in shortest form (overlong input is accepted).
    if (cpt < 0x80) {
      out += static_cast<char>(cpt);
    } else if (cpt < 0x800) {
      out += static_cast<char>(0xC0 | (cpt >> 6));
      out += static_cast<char>(0x80 | (cpt & 0x3F));
    } else if (cpt < 0x10000) {
      out += static_cast<char>(0xE0 | (cpt >> 12));
      out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cpt & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cpt >> 18));
      out += static_cast<char>(0x80 | ((cpt >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cpt & 0x3F));
    }
    i += len;
  }
  return out;
}

TEST(Robustness, ArbitraryBytesNeverCrashAndStayWithinTheVocab) {
  const char* files[] = {"models/vocab/ggml-vocab-llama-spm.gguf",      "models/vocab/ggml-vocab-phi-3.gguf",
                         "models/vocab/ggml-vocab-qwen3.gguf",          "models/vocab/ggml-vocab-gpt-2.gguf",
                         "models/vocab/ggml-vocab-deepseek-llm.gguf",   "models/vocab/ggml-vocab-deepseek-coder.gguf",
                         "models/vocab/ggml-vocab-falcon.gguf",         "models/vocab/ggml-vocab-mpt.gguf",
                         "models/vocab/ggml-vocab-starcoder.gguf",      "models/vocab/ggml-vocab-bert-bge.gguf",
                         "models/TinyStories-656K-Q8_0.gguf"};
  const auto inputs = nasty_inputs();
  for (const char* f : files) {
    const auto vocab = load_shared_vocab(f);
    ASSERT_NE(vocab, nullptr) << f;
    for (const std::string& s : inputs) {
      for (bool special : {false, true}) {
        const auto ids = vocab->tokenize(s, special, special);
        for (Token t : ids) ASSERT_TRUE(t >= 0 && t < vocab->n_tokens()) << f;
        (void)vocab->detokenize(ids, special, special);
      }
    }
    // Ids that are not tokens render as nothing.
    const std::vector<Token> junk = {-5, -1, vocab->n_tokens(), vocab->n_tokens() + 100, 0, 1, 2};
    (void)vocab->detokenize(junk, true, true);
    EXPECT_EQ(vocab->token_to_piece(-1, true), "");
    EXPECT_EQ(vocab->token_text(vocab->n_tokens()), "");
    EXPECT_EQ(vocab->token_type(-3), TokenType::Undefined);
    EXPECT_FALSE(vocab->is_eog(vocab->n_tokens()));
  }
}

TEST(Robustness, InvalidUtf8RoundTripsAsLlamaCppReadsIt) {
  // Byte-level BPE: invalid bytes come back as U+FFFD, everything else unchanged.
  const auto qwen = load_shared_vocab("models/vocab/ggml-vocab-qwen3.gguf");
  ASSERT_NE(qwen, nullptr);
  // SPM keeps the raw bytes (byte fallback).
  const auto spm = load_shared_vocab("models/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(spm, nullptr);
  for (const std::string& s : nasty_inputs()) {
    if (s.find("<|") != std::string::npos) continue;  // contains special-token text
    EXPECT_EQ(qwen->detokenize(qwen->tokenize(s, false, false), false, false), lenient_utf8(s));
    // (Spaces are left out: see SpmSwallowsTheBytesAnInvalidLeadByteAnnounces.)
    if (s.find("\xE2\x96\x81") == std::string::npos && s.find(' ') == std::string::npos) {
      EXPECT_EQ(spm->detokenize(spm->tokenize(s, false, false), false, false), s);
    }
  }
  EXPECT_EQ(qwen->detokenize(qwen->tokenize("a\xFF" "b", false, false), false, false), "a\xEF\xBF\xBD" "b");
}

TEST(Robustness, ConcurrentTokenizationMatchesSequential) {
  const auto vocab = load_shared_vocab("models/vocab/ggml-vocab-qwen3.gguf");
  ASSERT_NE(vocab, nullptr);
  const auto inputs = nasty_inputs();
  std::vector<std::vector<Token>> expected;
  for (const auto& s : inputs) expected.push_back(vocab->tokenize(s, true, true));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (vocab->tokenize(inputs[i], true, true) != expected[i]) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(Robustness, SpmSwallowsTheBytesAnInvalidLeadByteAnnounces) {
  // llama.cpp's SPM splits symbols by the lead byte's announced length, so 0xFF takes the next three
  // bytes with it, here the escaped space "\xE2\x96\x81", which then falls back to bytes and no longer
  // reads as a space.
  const auto spm = load_shared_vocab("models/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(spm, nullptr);
  const auto ids = spm->tokenize("a\xFF b", false, false);
  EXPECT_EQ(ids, (std::vector<Token>{263, 258, 229, 153, 132, 29890}));  // ▁a <0xFF><0xE2><0x96><0x81> b
  EXPECT_EQ(spm->detokenize(ids, false, false), "a\xFF\xE2\x96\x81" "b");
}

TEST(Utf8Stream, HoldsBackSplitMultiByteCharacters) {
  Utf8Stream stream;
  EXPECT_EQ(stream.push("a\xE2"), "a");
  EXPECT_EQ(stream.push("\x82"), "");
  EXPECT_EQ(stream.push("\xAC!"), "\xE2\x82\xAC!");  // €
  EXPECT_EQ(stream.push("\xF0\x9F"), "");
  EXPECT_EQ(stream.push("\x98"), "");
  EXPECT_EQ(stream.push("\x81"), "\xF0\x9F\x98\x81");  // 😁
  EXPECT_EQ(stream.push(""), "");
  EXPECT_EQ(stream.push("\xC3"), "");
  EXPECT_EQ(stream.flush(), "\xC3");  // an incomplete tail comes out at the end
  EXPECT_EQ(stream.flush(), "");
}

TEST(Utf8Stream, PassesInvalidBytesThrough) {
  Utf8Stream stream;
  EXPECT_EQ(stream.push("\x80\x80"), "\x80\x80");       // stray continuation bytes
  EXPECT_EQ(stream.push("\xFF" "x"), "\xFF" "x");       // a byte that starts nothing
  EXPECT_EQ(stream.push("\xF0\x9F\x98\x81\x81"), "\xF0\x9F\x98\x81\x81");
}

TEST(Utf8Stream, JoinsStreamedPiecesOfSplitCharacters) {
  // Piece by piece, tokens of a byte-fallback character never emit half a character.
  const auto vocab = load_shared_vocab("models/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(vocab, nullptr);
  const std::string text = "x \xF0\x9F\xA6\x99 y \xE2\x82\xAC";
  Utf8Stream stream;
  std::string out;
  for (Token t : vocab->tokenize(text, false, false)) {
    const std::string chunk = stream.push(vocab->token_to_piece(t, false));
    const auto* p = reinterpret_cast<const unsigned char*>(chunk.data());
    if (!chunk.empty()) {
      EXPECT_NE(p[chunk.size() - 1] & 0xC0, 0xC0) << "chunk ends inside a character";
    }
    out += chunk;
  }
  out += stream.flush();
  EXPECT_EQ(out, " " + text);
}

// Builds a tiny in-memory vocab file.
Result<std::shared_ptr<const Vocab>> load_synthetic(const std::string& model, const std::string& pre) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", model);
  if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "\xC4\xA0", "<|end|>"});
  w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 1, 3});
  w.set_string_array("tokenizer.ggml.merges", {"a b"});
  w.set_u32("tokenizer.ggml.eos_token_id", 4);
  auto bytes = w.write_to_memory();
  if (!bytes.ok()) return bytes.error();
  auto file = gguf::File::from_bytes(bytes.value(), "synthetic.gguf");
  if (!file.ok()) return file.error();
  return Vocab::load(*file.value());
}

TEST(VocabLoad, UnknownPreTokenizerIsAClearError) {
  auto vocab = load_synthetic("gpt2", "no-such-pre");
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.error().message.find("no-such-pre"), std::string::npos) << vocab.error().message;
  EXPECT_NE(vocab.error().message.find("synthetic.gguf"), std::string::npos) << vocab.error().message;
}

TEST(VocabLoad, UnsupportedModelIsAClearError) {
  auto vocab = load_synthetic("t5", "");
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.error().message.find("'t5'"), std::string::npos) << vocab.error().message;
}

TEST(VocabLoad, MissingPreUsesTheDefaultRegexes) {
  auto vocab = load_synthetic("gpt2", "");
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  EXPECT_EQ(vocab.value()->tokenize("ab", false, false), std::vector<Token>{2});
  EXPECT_EQ(vocab.value()->tokenize("ab ab", false, false), (std::vector<Token>{2, 3, 2}));  // "Ġab" is no token
  EXPECT_TRUE(vocab.value()->is_eog(4));
  EXPECT_EQ(vocab.value()->tokenize("a<|end|>", false, true), (std::vector<Token>{0, 4}));
}

}  // namespace
}  // namespace strata::text
