#include "text/utf8.h"

namespace strata::text::detail {

namespace {

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

// Code point standing for each byte: printable Latin-1 bytes map to themselves, the other 68 bytes
// to U+0100.. in increasing byte order.
std::array<uint32_t, 256> make_gpt2_cpts() {
  std::array<uint32_t, 256> cpts{};
  uint32_t next = 0x100;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    cpts[b] = printable ? b : next++;
  }
  return cpts;
}

const std::array<uint32_t, 256>& gpt2_cpts() {
  static const std::array<uint32_t, 256> cpts = make_gpt2_cpts();
  return cpts;
}

}  // namespace

std::vector<uint32_t> decode_utf8_lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b0 = s[i];
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cpt = 0;
    if ((b0 & 0xE0) == 0xC0) {
      len = 2;
      cpt = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3;
      cpt = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4;
      cpt = b0 & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if (!is_cont(s[i + k])) ok = false;
      else cpt = (cpt << 6) | (s[i + k] & 0x3F);
    }
    if (!ok) {
      out.push_back(kReplacementChar);
      ++i;
      continue;
    }
    out.push_back(cpt);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cpt >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

const std::array<std::string, 256>& gpt2_byte_to_utf8() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int b = 0; b < 256; ++b) append_utf8(t[b], gpt2_cpts()[b]);
    return t;
  }();
  return table;
}

int gpt2_cpt_to_byte(uint32_t cpt) {
  // Bytes map to code points below U+0144; build the inverse once.
  static const std::array<int16_t, 0x144> inverse = [] {
    std::array<int16_t, 0x144> inv;
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[gpt2_cpts()[b]] = static_cast<int16_t>(b);
    return inv;
  }();
  return cpt < inverse.size() ? inverse[cpt] : -1;
}

}  // namespace strata::text::detail
