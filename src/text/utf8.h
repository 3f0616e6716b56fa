// Internal UTF-8 helpers shared by the tokenizers. Decoding follows llama.cpp's lenient rules so that
// invalid input tokenizes the same way: an undecodable byte becomes U+FFFD and decoding resumes at the
// next byte; overlong forms are accepted and re-encode to their shortest form.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text::detail {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the sequence a byte starts, judged from its high bits only (continuation bytes count as 1).
inline size_t utf8_seq_len(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Decodes leniently (see above). Code points may be surrogates or exceed U+10FFFF when the input
// encodes them; callers decide what to do with those.
std::vector<uint32_t> decode_utf8_lenient(std::string_view text);

// Appends the UTF-8 form of a code point (1-4 bytes; values above 0x1FFFFF are masked, never UB).
void append_utf8(std::string& out, uint32_t cpt);

// GPT-2 byte-level map: byte -> UTF-8 text of the code point that stands for it.
const std::array<std::string, 256>& gpt2_byte_to_utf8();
// Inverse: code point -> byte, or -1 when the code point stands for no byte.
int gpt2_cpt_to_byte(uint32_t cpt);

}  // namespace strata::text::detail
