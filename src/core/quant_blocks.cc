#include "core/quant_blocks.h"

#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace vosti {
namespace {

constexpr int kQK = 32;  // elements per block of the legacy quants

float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q4_0: d f16, qs[16]; y = d * (q - 8).
void block_q4_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
    y[j + kQK / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// Q4_1: d f16, m f16, qs[16]; y = d * q + m.
void block_q4_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
    y[j + kQK / 2] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// Q5_0: d f16, qh u32 (bit j is the 5th bit of element j), qs[16]; y = d * (q - 16).
void block_q5_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * static_cast<float>(lo - 16);
    y[j + kQK / 2] = d * static_cast<float>(hi - 16);
  }
}

// Q5_1: d f16, m f16, qh u32, qs[16]; y = d * q + m.
void block_q5_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * static_cast<float>(lo) + m;
    y[j + kQK / 2] = d * static_cast<float>(hi) + m;
  }
}

// Q8_0: d f16, qs int8[32]; y = q * d.
void block_q8_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// The 8 six-bit (scale, min) pairs of Q4_K/Q5_K packed in 12 bytes.
void k_scale_min(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 0x3F;
    *mn = s[j + 4] & 0x3F;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
  }
}

// Q4_K: d f16, dmin f16, scales[12], qs[128]; sub-block j of 32: y = (d*sc_j) * q - (dmin*m_j).
void block_q4_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    k_scale_min(scales, j, &sc, &mn);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) y[32 * j + l] = dl * static_cast<float>((q[l] >> shift) & 0x0F) - ml;
  }
}

// Q5_K: d, dmin, scales[12], qh[32] (bit j: 5th bit of sub-block j), qs[128].
void block_q5_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    k_scale_min(scales, j, &sc, &mn);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0x0F) | (((qh[l] >> j) & 1) << 4);
      y[32 * j + l] = dl * static_cast<float>(v) - ml;
    }
  }
}

// Q6_K: ql[128], qh[64], scales int8[16], d f16; group g of 16: y = (d*sc_g) * (q - 32).
void block_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = load_f16(b + 208);
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < 128; ++t) {
      const int lo = (ql[64 * h + t % 64] >> (4 * (t / 64))) & 0x0F;
      const int hi = (qh[32 * h + t % 32] >> (2 * (t / 32))) & 0x03;
      const int e = 128 * h + t;
      const float dl = d * static_cast<float>(scales[e / 16]);
      y[e] = dl * static_cast<float>((lo | (hi << 4)) - 32);
    }
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(WeightType type) {
  switch (type) {
    case WeightType::kQ4_0:
      return block_q4_0;
    case WeightType::kQ4_1:
      return block_q4_1;
    case WeightType::kQ5_0:
      return block_q5_0;
    case WeightType::kQ5_1:
      return block_q5_1;
    case WeightType::kQ8_0:
      return block_q8_0;
    case WeightType::kQ4_K:
      return block_q4_k;
    case WeightType::kQ5_K:
      return block_q5_k;
    case WeightType::kQ6_K:
      return block_q6_k;
    default:
      return nullptr;
  }
}

}  // namespace

BlockLayout block_layout(WeightType type) {
  switch (type) {
    case WeightType::kF32:
      return {1, 4};
    case WeightType::kF16:
    case WeightType::kBF16:
      return {1, 2};
    case WeightType::kQ4_0:
      return {32, 18};
    case WeightType::kQ4_1:
      return {32, 20};
    case WeightType::kQ5_0:
      return {32, 22};
    case WeightType::kQ5_1:
      return {32, 24};
    case WeightType::kQ8_0:
      return {32, 34};
    case WeightType::kQ4_K:
      return {256, 144};
    case WeightType::kQ5_K:
      return {256, 176};
    case WeightType::kQ6_K:
      return {256, 210};
    default:
      return {};
  }
}

float decode_plain(WeightType type, const uint8_t* row, int64_t i) {
  if (type == WeightType::kF32) {
    float f;
    std::memcpy(&f, row + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, row + 2 * i, 2);
  return type == WeightType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
}

void decode_values(WeightType type, const uint8_t* src, int64_t num_elements, float* dst) {
  const BlockLayout layout = block_layout(type);
  VOSTI_CHECK(layout.elems > 0 && num_elements % layout.elems == 0, "decode_values: not a whole number of blocks");
  if (type == WeightType::kF32) {
    if (num_elements > 0) std::memcpy(dst, src, static_cast<size_t>(num_elements) * 4);
    return;
  }
  if (layout.elems == 1) {
    for (int64_t i = 0; i < num_elements; ++i) dst[i] = decode_plain(type, src, i);
    return;
  }
  const BlockFn fn = block_fn(type);
  for (int64_t i = 0; i < num_elements / layout.elems; ++i) fn(src + i * layout.bytes, dst + i * layout.elems);
}

}  // namespace vosti
