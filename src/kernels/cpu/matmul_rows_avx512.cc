// The one-row matmul kernel (matmul_row_kernels.h) built with AVX-512VL enabled
// (src/CMakeLists.txt gives this file -mavx512f -mavx512vl -mavx512bw -mavx512dq), used
// when the CPU has those (matmul_avx2.cc decides once per process).
//
// Same bits as the AVX2 build, by construction: the vectors stay 256 bits wide and every
// element sees the same f32 operations in the same order; AVX-512VL only brings 32 vector
// registers (no spills at 4 columns) and vpermt2ps, with which Q4_0, Q4_1 and Q4_K decode through
// a 16-entry table per block: entry q holds d * (q - 8) (Q4_0) or d * q + m (Q4_1),
// computed by exactly the operations the scalar decoder applies to a code q, and the
// permute only selects it. tests/kernels/quant_matmul_test.cc checks the result against the
// documented order on every code wherever the tests run on an AVX-512 machine.
#include <immintrin.h>

#include "core/check.h"
#include "kernels/cpu/matmul_avx2.h"
#include "kernels/cpu/matmul_row_kernels.h"
#include "kernels/cpu/quant_avx2.h"

namespace vosti {
namespace {

// Table indices of group g of a legacy 32-block: vpermt2ps reads only the low 4 bits of each
// index, so the low nibbles need no mask (codes 0..15 either way).
inline __m256i table_index_32(const uint8_t* qs, int g) {
  const __m256i b = avx2::load_u8x8(qs + 8 * (g % 2));
  return g < 2 ? b : _mm256_srli_epi32(b, 4);
}

// The same for group g (of 32) of a Q4_K block's qs[128] (sub-block j = g / 4).
inline __m256i table_index_k(const uint8_t* qs, int g) {
  const int j = g / 4;
  const __m256i b = avx2::load_u8x8(qs + 32 * (j / 2) + 8 * (g % 4));
  return j % 2 == 0 ? b : _mm256_srli_epi32(b, 4);
}

// f32 values 0..7 and 8..15.
inline __m256 codes_lo() { return _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7); }
inline __m256 codes_hi() { return _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15); }

struct Q4_0TableCodec {
  static constexpr WeightType kType = WeightType::kQ4_0;
  static constexpr int64_t kElems = 32, kBytes = 18;
  struct State {
    __m256 lo, hi;  // values of codes 0..7 and 8..15: d * float(q - 8)
  };
  static State prepare(const uint8_t* b) {
    const __m256 d = _mm256_set1_ps(avx2::load_f16_scale(b));
    const __m256 eight = _mm256_set1_ps(8.0f);  // float(q - 8) == float(q) - 8 exactly for q < 16
    return {_mm256_mul_ps(d, _mm256_sub_ps(codes_lo(), eight)), _mm256_mul_ps(d, _mm256_sub_ps(codes_hi(), eight))};
  }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    return _mm256_permutex2var_ps(s.lo, table_index_32(b + 2, g), s.hi);
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

struct Q4_1TableCodec {
  static constexpr WeightType kType = WeightType::kQ4_1;
  static constexpr int64_t kElems = 32, kBytes = 20;
  struct State {
    __m256 lo, hi;  // values of codes 0..7 and 8..15: d * float(q) + m
  };
  static State prepare(const uint8_t* b) {
    const __m256 d = _mm256_set1_ps(avx2::load_f16_scale(b));
    const __m256 m = _mm256_set1_ps(avx2::load_f16_scale(b + 2));
    return {_mm256_add_ps(_mm256_mul_ps(d, codes_lo()), m), _mm256_add_ps(_mm256_mul_ps(d, codes_hi()), m)};
  }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    return _mm256_permutex2var_ps(s.lo, table_index_32(b + 4, g), s.hi);
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

// Q4_K: sub-block j's table holds dl_j * float(q) - ml_j; it is a pure function of the block,
// so the compiler builds it once for the four groups of the sub-block.
struct Q4_KTableCodec {
  static constexpr WeightType kType = WeightType::kQ4_K;
  static constexpr int64_t kElems = 256, kBytes = 144;
  using State = avx2::KScales;
  static State prepare(const uint8_t* b) { return avx2::k_scales(b); }
  static __m256 group(const uint8_t* b, const State& s, int g) {
    const int j = g / 4;
    const __m256 dl = _mm256_set1_ps(s.dl[j]), ml = _mm256_set1_ps(s.ml[j]);
    const __m256 lo = _mm256_sub_ps(_mm256_mul_ps(dl, codes_lo()), ml);
    const __m256 hi = _mm256_sub_ps(_mm256_mul_ps(dl, codes_hi()), ml);
    return _mm256_permutex2var_ps(lo, table_index_k(b + 16, g), hi);
  }
  static float scalar(const uint8_t*, int64_t) { return 0.0f; }
};

}  // namespace

void matmul_row_columns_avx512(const float* x, int64_t k, const WeightRows& part, const float* bias, float* y,
                               int64_t col_begin, int64_t col_end) {
  if (part.type == WeightType::kQ4_0) {
    cpu_rows::row_columns<Q4_0TableCodec>(x, k, part.rows, bias, y, col_begin, col_end);
    return;
  }
  if (part.type == WeightType::kQ4_1) {
    cpu_rows::row_columns<Q4_1TableCodec>(x, k, part.rows, bias, y, col_begin, col_end);
    return;
  }
  const bool known = avx2::with_codec(
      part.type, [&]<typename Codec>() { cpu_rows::row_columns<Codec>(x, k, part.rows, bias, y, col_begin, col_end); });
  VOSTI_CHECK(known, "matmul: weight type without a CPU decoder");
}

}  // namespace vosti
