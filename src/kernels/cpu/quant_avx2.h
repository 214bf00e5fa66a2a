// In-register AVX2 decoders of the weight encodings of core/quant_blocks.h: each yields
// the stored values 8 at a time ("groups", in element order) as __m256, with exactly the
// bits of core/quant_blocks.h's scalar decoder. The same f32 operations per lane, in the
// same order: integer codes are widened exactly, converted to f32 exactly (|q| < 2^24),
// then the one or two rounded f32 operations the scalar decoder does (d*q, d*q + m,
// dl*q - ml, q*d). f16 scales are widened by F16C (exact; a signalling NaN comes out
// quiet, which the first arithmetic on the scalar decoder's value does too).
//
// A codec is a struct with
//   kElems, kBytes: one block (plain types: a group of 8 elements);
//   State prepare(const uint8_t* block): the block's scales, widened once;
//   __m256 group(const uint8_t* block, const State&, int g): elements [8g, 8g + 8);
//   float scalar(const uint8_t* row, int64_t i): element i of a row (plain types' tails).
// Thread safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/quant_blocks.h"

namespace vosti::avx2 {
// Internal linkage: each translation unit keeps its own copy, compiled for its own ISA
// (matmul_rows_avx512.cc builds these with AVX-512VL), so no copy can leak into another.
namespace {

inline float load_f16_scale(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 8 bytes at p widened to 8 int32 lanes.
inline __m256i load_u8x8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

struct Empty {};

struct F32Codec {
  static constexpr WeightType kType = WeightType::kF32;
  static constexpr int64_t kElems = 8, kBytes = 32;
  using State = Empty;
  static State prepare(const uint8_t*) { return {}; }
  static __m256 group(const uint8_t* b, const State&, int) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(b));
  }
  static float scalar(const uint8_t* row, int64_t i) { return decode_plain(kType, row, i); }
};

struct F16Codec {
  static constexpr WeightType kType = WeightType::kF16;
  static constexpr int64_t kElems = 8, kBytes = 16;
  using State = Empty;
  static State prepare(const uint8_t*) { return {}; }
  static __m256 group(const uint8_t* b, const State&, int) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  }
  static float scalar(const uint8_t* row, int64_t i) { return decode_plain(kType, row, i); }
};

struct BF16Codec {
  static constexpr WeightType kType = WeightType::kBF16;
  static constexpr int64_t kElems = 8, kBytes = 16;
  using State = Empty;
  static State prepare(const uint8_t*) { return {}; }
  static __m256 group(const uint8_t* b, const State&, int) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static float scalar(const uint8_t* row, int64_t i) { return decode_plain(kType, row, i); }
};

// The 4-bit codes of group g of a legacy 32-block: low nibbles of qs[0..15] are elements
// 0..15, high nibbles elements 16..31.
inline __m256i nibbles_32(const uint8_t* qs, int g) {
  const __m256i b = load_u8x8(qs + 8 * (g % 2));
  return g < 2 ? _mm256_and_si256(b, _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(b, 4);
}

// The 5th bits of elements [8g, 8g + 8) from qh (bit e is element e's), shifted to bit 4.
inline __m256i fifth_bits_32(uint32_t qh, int g) {
  const __m256i shifts = _mm256_add_epi32(_mm256_set1_epi32(8 * g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i bits =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(qh)), shifts), _mm256_set1_epi32(1));
  return _mm256_slli_epi32(bits, 4);
}

struct Q4_0Codec {
  static constexpr WeightType kType = WeightType::kQ4_0;
  static constexpr int64_t kElems = 32, kBytes = 18;
  struct State {
    __m256 d;
  };
  static State prepare(const uint8_t* b) { return {_mm256_set1_ps(load_f16_scale(b))}; }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    const __m256i q = _mm256_sub_epi32(nibbles_32(b + 2, g), _mm256_set1_epi32(8));
    return _mm256_mul_ps(s.d, _mm256_cvtepi32_ps(q));
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

struct Q4_1Codec {
  static constexpr WeightType kType = WeightType::kQ4_1;
  static constexpr int64_t kElems = 32, kBytes = 20;
  struct State {
    __m256 d, m;
  };
  static State prepare(const uint8_t* b) {
    return {_mm256_set1_ps(load_f16_scale(b)), _mm256_set1_ps(load_f16_scale(b + 2))};
  }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    return _mm256_add_ps(_mm256_mul_ps(s.d, _mm256_cvtepi32_ps(nibbles_32(b + 4, g))), s.m);
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

struct Q5_0Codec {
  static constexpr WeightType kType = WeightType::kQ5_0;
  static constexpr int64_t kElems = 32, kBytes = 22;
  struct State {
    __m256 d;
    uint32_t qh;
  };
  static State prepare(const uint8_t* b) {
    State s{_mm256_set1_ps(load_f16_scale(b)), 0};
    std::memcpy(&s.qh, b + 2, 4);
    return s;
  }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    const __m256i v = _mm256_or_si256(nibbles_32(b + 6, g), fifth_bits_32(s.qh, g));
    return _mm256_mul_ps(s.d, _mm256_cvtepi32_ps(_mm256_sub_epi32(v, _mm256_set1_epi32(16))));
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

struct Q5_1Codec {
  static constexpr WeightType kType = WeightType::kQ5_1;
  static constexpr int64_t kElems = 32, kBytes = 24;
  struct State {
    __m256 d, m;
    uint32_t qh;
  };
  static State prepare(const uint8_t* b) {
    State s{_mm256_set1_ps(load_f16_scale(b)), _mm256_set1_ps(load_f16_scale(b + 2)), 0};
    std::memcpy(&s.qh, b + 4, 4);
    return s;
  }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    const __m256i v = _mm256_or_si256(nibbles_32(b + 8, g), fifth_bits_32(s.qh, g));
    return _mm256_add_ps(_mm256_mul_ps(s.d, _mm256_cvtepi32_ps(v)), s.m);
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

struct Q8_0Codec {
  static constexpr WeightType kType = WeightType::kQ8_0;
  static constexpr int64_t kElems = 32, kBytes = 34;
  struct State {
    __m256 d;
  };
  static State prepare(const uint8_t* b) { return {_mm256_set1_ps(load_f16_scale(b))}; }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + 8 * g)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), s.d);
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

// Q4_K/Q5_K: sub-block j's f32 scale d*sc_j and min dmin*m_j (scalar, as the decoder).
struct KScales {
  float dl[8];
  float ml[8];
};
inline KScales k_scales(const uint8_t* b) {
  const float d = load_f16_scale(b), dmin = load_f16_scale(b + 2);
  const uint8_t* s = b + 4;
  KScales out;
  for (int j = 0; j < 8; ++j) {
    const int sc = j < 4 ? s[j] & 0x3F : (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30);
    const int mn = j < 4 ? s[j + 4] & 0x3F : (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
    out.dl[j] = d * static_cast<float>(sc);
    out.ml[j] = dmin * static_cast<float>(mn);
  }
  return out;
}

// The 4-bit codes of group g (of 32) of a Q4_K/Q5_K block's qs[128]: sub-block j = g / 4
// reads qs[32 * (j / 2) + l], low nibble for even j, high for odd j.
inline __m256i nibbles_k(const uint8_t* qs, int g) {
  const int j = g / 4;
  const __m256i b = load_u8x8(qs + 32 * (j / 2) + 8 * (g % 4));
  return j % 2 == 0 ? _mm256_and_si256(b, _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(b, 4);
}

struct Q4_KCodec {
  static constexpr WeightType kType = WeightType::kQ4_K;
  static constexpr int64_t kElems = 256, kBytes = 144;
  using State = KScales;
  static State prepare(const uint8_t* b) { return k_scales(b); }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    const int j = g / 4;
    const __m256 q = _mm256_cvtepi32_ps(nibbles_k(b + 16, g));
    return _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(s.dl[j]), q), _mm256_set1_ps(s.ml[j]));
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

struct Q5_KCodec {
  static constexpr WeightType kType = WeightType::kQ5_K;
  static constexpr int64_t kElems = 256, kBytes = 176;
  using State = KScales;
  static State prepare(const uint8_t* b) { return k_scales(b); }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    const int j = g / 4;
    const __m256i hb = _mm256_and_si256(_mm256_srli_epi32(load_u8x8(b + 16 + 8 * (g % 4)), j), _mm256_set1_epi32(1));
    const __m256i v = _mm256_or_si256(nibbles_k(b + 48, g), _mm256_slli_epi32(hb, 4));
    return _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(s.dl[j]), _mm256_cvtepi32_ps(v)), _mm256_set1_ps(s.ml[j]));
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

struct Q6_KCodec {
  static constexpr WeightType kType = WeightType::kQ6_K;
  static constexpr int64_t kElems = 256, kBytes = 210;
  struct State {
    float dl[16];  // d * sc_i for the 16 groups of 16
  };
  static State prepare(const uint8_t* b) {
    const float d = load_f16_scale(b + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    State s;
    for (int i = 0; i < 16; ++i) s.dl[i] = d * static_cast<float>(sc[i]);
    return s;
  }
  // Element e = 128h + t: low 4 bits from ql[64h + t % 64] >> 4 (t / 64), high 2 bits from
  // qh[32h + t % 32] >> 2 (t / 32); value dl[e / 16] * (q - 32). Groups 2p and 2p + 1 share
  // the 16 codes q - 32 built byte-wise (the same integers; the compiler computes them once).
  static __m256 group(const uint8_t* b, const State& s, int g) {
    const int e0 = 16 * (g / 2), h = e0 / 128, t0 = e0 % 128;
    const __m128i nib = _mm_set1_epi8(0x0F);
    const __m128i ql = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 64 * h + t0 % 64));
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 128 + 32 * h + t0 % 32));
    const __m128i lo = _mm_and_si128(_mm_srli_epi16(ql, 4 * (t0 / 64)), nib);
    const __m128i hi = _mm_and_si128(_mm_slli_epi16(_mm_srli_epi16(qh, 2 * (t0 / 32)), 4), _mm_set1_epi8(0x30));
    const __m128i q = _mm_sub_epi8(_mm_or_si128(lo, hi), _mm_set1_epi8(32));  // 16 codes - 32, int8
    const __m256i v = _mm256_cvtepi8_epi32(g % 2 == 0 ? q : _mm_srli_si128(q, 8));
    return _mm256_mul_ps(_mm256_set1_ps(s.dl[e0 / 16]), _mm256_cvtepi32_ps(v));
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

// Calls fn.template operator()<Codec>() with the codec of `type`; false if there is none.
template <typename Fn>
bool with_codec(WeightType type, Fn&& fn) {
  switch (type) {
    case WeightType::kF32:
      fn.template operator()<F32Codec>();
      return true;
    case WeightType::kF16:
      fn.template operator()<F16Codec>();
      return true;
    case WeightType::kBF16:
      fn.template operator()<BF16Codec>();
      return true;
    case WeightType::kQ4_0:
      fn.template operator()<Q4_0Codec>();
      return true;
    case WeightType::kQ4_1:
      fn.template operator()<Q4_1Codec>();
      return true;
    case WeightType::kQ5_0:
      fn.template operator()<Q5_0Codec>();
      return true;
    case WeightType::kQ5_1:
      fn.template operator()<Q5_1Codec>();
      return true;
    case WeightType::kQ8_0:
      fn.template operator()<Q8_0Codec>();
      return true;
    case WeightType::kQ4_K:
      fn.template operator()<Q4_KCodec>();
      return true;
    case WeightType::kQ5_K:
      fn.template operator()<Q5_KCodec>();
      return true;
    case WeightType::kQ6_K:
      fn.template operator()<Q6_KCodec>();
      return true;
    default:
      return false;
  }
}

// out[k] = the row's values (groups in order, then a plain type's tail).
template <typename Codec>
void decode_row(const uint8_t* row, int64_t k, float* out) {
  const int64_t nb = k / Codec::kElems;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * Codec::kBytes;
    const typename Codec::State s = Codec::prepare(blk);
#pragma GCC unroll 32
    for (int g = 0; g < Codec::kElems / 8; ++g)
      _mm256_storeu_ps(out + b * Codec::kElems + 8 * g, Codec::group(blk, s, g));
  }
  for (int64_t i = nb * Codec::kElems; i < k; ++i) out[i] = Codec::scalar(row, i);
}

}  // namespace
}  // namespace vosti::avx2
