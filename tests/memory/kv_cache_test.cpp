// KvCache per cache type: row sizes, offsets and total bytes, the refusal of rows that are not whole
// blocks, and rows written in llama.cpp's formats (checked against quantizers written out here from
// ggml's definitions).
#include "memory/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/checked.h"

namespace strata::memory {
namespace {

KvConfig config(DType k, DType v) {
  KvConfig c;
  c.n_layer = 4;
  c.layer_has_kv = {1, 0, 1, 1};
  c.n_embd_k = 128;  // 2 heads of 64
  c.head_dim_k = 64;
  c.n_embd_v = 64;   // 2 heads of 32
  c.head_dim_v = 32;
  c.n_seq = 2;
  c.n_ctx_per_seq = 10;
  c.type_k = k;
  c.type_v = v;
  return c;
}

std::vector<uint8_t> f16_reference(const std::vector<float>& x) {
  std::vector<uint8_t> out(2 * x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t h = fp32_to_fp16(x[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

// ggml: Q8_0 = {f16 d; int8 q[32]}, d = amax / 127, q = round(x * 127 / amax) (x86: nearest even).
std::vector<uint8_t> q8_0_reference(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const uint16_t d = fp32_to_fp16(amax / 127.0f);
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    out.push_back(static_cast<uint8_t>(d & 0xff));
    out.push_back(static_cast<uint8_t>(d >> 8));
    for (int j = 0; j < 32; ++j) out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(x[b + j] * id))));
  }
  return out;
}

// ggml's quantize_row_q4_0_ref: d = (signed value of largest |x|) / -8, q = min(15, (int8)(x / d + 8.5)),
// element j in the low nibble of byte j, element j + 16 in its high nibble.
std::vector<uint8_t> q4_0_reference(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0, m = 0;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[b + j]) > amax) {
        amax = std::fabs(x[b + j]);
        m = x[b + j];
      }
    }
    const float d = m / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t h = fp32_to_fp16(d);
    out.push_back(static_cast<uint8_t>(h & 0xff));
    out.push_back(static_cast<uint8_t>(h >> 8));
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[b + j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[b + j + 16] * id + 8.5f)));
      out.push_back(static_cast<uint8_t>(lo | (hi << 4)));
    }
  }
  return out;
}

TEST(KvCache, rows_sizes_and_offsets_follow_each_type) {
  struct Case {
    DType k, v;
    size_t k_row, v_row;
  };
  // f16: 2 bytes an element; q8_0: 34 bytes per 32; q4_0: 18 bytes per 32.
  for (const Case& c : {Case{DType::F16, DType::F16, 256, 128}, Case{DType::Q8_0, DType::Q8_0, 136, 68},
                        Case{DType::Q4_0, DType::Q4_0, 72, 36}, Case{DType::Q8_0, DType::Q4_0, 136, 36},
                        Case{DType::F16, DType::Q4_0, 256, 36}}) {
    const KvConfig cfg = config(c.k, c.v);
    const uint64_t want = 3 * 2 * 10 * (c.k_row + c.v_row);  // 3 layers with a cache, 2 sequences, 10 cells
    EXPECT_EQ(KvCache::bytes_needed(cfg), want) << kv_type_name(c.k) << "/" << kv_type_name(c.v);
    auto kv = KvCache::create(cfg);
    ASSERT_TRUE(kv.ok()) << kv.error().message;
    EXPECT_EQ(kv->bytes(), want);
    EXPECT_EQ(kv->k_row_bytes(), c.k_row);
    EXPECT_EQ(kv->v_row_bytes(), c.v_row);
    // Two heads per row; layer 2 is the second layer with a cache (slot 1). Head-major: a head's
    // positions are adjacent, then the next head, sequence, layer.
    ASSERT_EQ(kv->n_head_k(), 2);
    ASSERT_EQ(kv->n_head_v(), 2);
    EXPECT_EQ(kv->k_head_bytes() * 2, c.k_row);
    EXPECT_EQ(kv->v_head_bytes() * 2, c.v_row);
    EXPECT_EQ(kv->k(2, 1, 1, 3) - kv->k(0, 0, 0, 0),
              static_cast<ptrdiff_t>((((1 * 2 + 1) * 2 + 1) * 10 + 3) * kv->k_head_bytes()));
    EXPECT_EQ(kv->v(3, 0, 1, 9) - kv->v(0, 0, 0, 0),
              static_cast<ptrdiff_t>((((2 * 2 + 0) * 2 + 1) * 10 + 9) * kv->v_head_bytes()));
    EXPECT_EQ(kv->k(0, 0, 0, 1) - kv->k(0, 0, 0, 0), static_cast<ptrdiff_t>(kv->k_head_bytes()));
  }
}

TEST(KvCache, quantized_types_refuse_rows_or_heads_that_are_not_whole_blocks) {
  KvConfig heads = config(DType::Q8_0, DType::F16);
  heads.layer_has_kv = {0, 1, 1, 0};
  heads.n_embd_k = 64;  // 8 heads of 8: whole blocks per row, not per head
  heads.head_dim_k = 8;
  auto kv = KvCache::create(heads);
  ASSERT_FALSE(kv.ok());
  for (const char* part : {"K", "q8_0", "layer 1", "head_dim 8", "32"}) {
    EXPECT_NE(kv.error().message.find(part), std::string::npos) << part << " in: " << kv.error().message;
  }
  heads.type_k = DType::F16;  // F16 has no blocks
  EXPECT_TRUE(KvCache::create(heads).ok());

  KvConfig row = config(DType::F16, DType::Q4_0);
  row.n_embd_v = 48;  // not whole heads of 32
  kv = KvCache::create(row);
  ASSERT_FALSE(kv.ok());
  for (const char* part : {"V", "layer 0", "48", "heads of 32"}) {
    EXPECT_NE(kv.error().message.find(part), std::string::npos) << part << " in: " << kv.error().message;
  }
  row.head_dim_v = 0;  // unknown head size: refused as well
  EXPECT_FALSE(KvCache::create(row).ok());
}

TEST(KvCache, other_types_are_refused_with_the_supported_list) {
  for (DType t : {DType::F32, DType::BF16, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL}) {
    auto kv = KvCache::create(config(t, DType::F16));
    ASSERT_FALSE(kv.ok()) << kv_type_name(t);
    EXPECT_NE(kv.error().message.find("f16, q8_0, q4_0"), std::string::npos) << kv.error().message;
    EXPECT_EQ(KvCache::bytes_needed(config(DType::F16, t)), kSaturated);
  }
  for (const char* name : {"f32", "bf16", "q4_1", "iq4_nl", "q5_0", "q5_1", "Q8_0", "", "q8_0 "}) {
    auto t = parse_kv_type(name);
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_NE(t.error().message.find("f16, q8_0, q4_0"), std::string::npos) << t.error().message;
  }
  EXPECT_EQ(*parse_kv_type("f16"), DType::F16);
  EXPECT_EQ(*parse_kv_type("q8_0"), DType::Q8_0);
  EXPECT_EQ(*parse_kv_type("q4_0"), DType::Q4_0);
}

TEST(KvCache, sizes_from_outside_saturate_instead_of_overflowing) {
  KvConfig c = config(DType::Q8_0, DType::Q4_0);
  c.n_ctx_per_seq = 1 << 30;
  c.n_seq = 1 << 30;
  c.n_embd_k = 1 << 30;
  EXPECT_EQ(KvCache::bytes_needed(c), kSaturated);
  EXPECT_FALSE(KvCache::create(c).ok());
}

// Layer 2's K (V) row of (seq, pos), its heads gathered in order.
std::vector<uint8_t> row(const KvCache& kv, bool is_k, int seq, int pos) {
  std::vector<uint8_t> out;
  const int32_t heads = is_k ? kv.n_head_k() : kv.n_head_v();
  const size_t bytes = is_k ? kv.k_head_bytes() : kv.v_head_bytes();
  for (int32_t h = 0; h < heads; ++h) {
    const uint8_t* p = is_k ? kv.k(2, seq, h, pos) : kv.v(2, seq, h, pos);
    out.insert(out.end(), p, p + bytes);
  }
  return out;
}

TEST(KvCache, rows_are_written_in_llama_cpp_formats_and_copied_whole) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 2.0f);
  std::vector<float> k(128), v(64);
  for (float& x : k) x = g(rng);
  for (float& x : v) x = g(rng);
  k[5] = 0.5f * std::nextafter(1.0f, 2.0f);  // odd values near the rounding points
  std::fill(v.begin() + 32, v.end(), 0.0f);   // an all-zero block: d = 0, every q the midpoint
  struct Case {
    DType k, v;
  };
  for (const Case& c : {Case{DType::F16, DType::F16}, Case{DType::Q8_0, DType::Q8_0}, Case{DType::Q4_0, DType::Q4_0}}) {
    auto kv = KvCache::create(config(c.k, c.v));
    ASSERT_TRUE(kv.ok());
    kv->write_k(2, 1, 4, k.data());
    kv->write_v(2, 1, 4, v.data());
    std::vector<uint8_t> want_k, want_v;
    if (c.k == DType::F16) {
      want_k = f16_reference(k);
      want_v = f16_reference(v);
    } else if (c.k == DType::Q8_0) {
      want_k = q8_0_reference(k);
      want_v = q8_0_reference(v);
    } else {
      want_k = q4_0_reference(k);
      want_v = q4_0_reference(v);
    }
    const std::string what = kv_type_name(c.k);
    ASSERT_EQ(want_k.size(), kv->k_row_bytes()) << what;
    EXPECT_EQ(row(*kv, true, 1, 4), want_k) << what;
    EXPECT_EQ(row(*kv, false, 1, 4), want_v) << what;
    // Sequence copy carries the quantized rows byte for byte.
    kv->set_n_past(1, 5);
    ASSERT_TRUE(kv->copy(1, 0).ok());
    EXPECT_EQ(kv->n_past(0), 5);
    EXPECT_EQ(row(*kv, true, 0, 4), want_k) << what;
    EXPECT_EQ(row(*kv, false, 0, 4), want_v) << what;
  }
}

// The host prompt cache copies a sequence's rows out and back: the same bytes come back into another
// sequence, which then holds exactly those positions; rows of another shape are refused.
TEST(KvCache, saved_rows_come_back_byte_for_byte_into_any_sequence) {
  for (DType t : {DType::F16, DType::Q8_0}) {
    auto kv = KvCache::create(config(t, t));
    ASSERT_TRUE(kv.ok());
    std::mt19937 rng(5);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> k(128), v(64);
    for (int pos = 0; pos < 7; ++pos) {
      for (float& x : k) x = g(rng);
      for (float& x : v) x = g(rng);
      for (int il : {0, 2, 3}) {
        kv->write_k(il, 0, pos, k.data());
        kv->write_v(il, 0, pos, v.data());
      }
    }
    kv->set_n_past(0, 7);
    auto rows = kv->save_rows(0);
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ(rows->n, 7);
    EXPECT_EQ(rows->bytes(), 3u * 7 * (kv->k_row_bytes() + kv->v_row_bytes()));
    kv->set_n_past(1, 9);
    ASSERT_TRUE(kv->load_rows(1, *rows).ok());
    EXPECT_EQ(kv->n_past(1), 7);
    for (int pos = 0; pos < 7; ++pos) {
      EXPECT_EQ(row(*kv, true, 1, pos), row(*kv, true, 0, pos)) << pos;
      EXPECT_EQ(row(*kv, false, 1, pos), row(*kv, false, 0, pos)) << pos;
    }
    KvRows bad = *rows;
    bad.k.pop_back();
    EXPECT_FALSE(kv->load_rows(1, bad).ok());
    bad = *rows;
    bad.n = 11;  // more than a sequence's cells
    EXPECT_FALSE(kv->load_rows(1, bad).ok());
    EXPECT_FALSE(kv->load_rows(2, *rows).ok());
  }
}

}  // namespace
}  // namespace strata::memory
