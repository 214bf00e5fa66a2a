// XXH3-128 (seed 0, default secret) of inputs longer than 240 bytes, written once for host
// and device (__host__ __device__ under nvcc, plain inline C++ under g++): the host's logits
// digest (sample/logits_digest.h) and the device digest of a logits row
// (kernels/cuda/sampler/digest_kernels.h) are both this source; tests/sample check it against
// libxxhash, an independent implementation. This is the algorithm of the xxHash specification
// (XXH3 "long" path: 64-byte stripes, 16 stripes per 1024-byte block, scramble after
// each block, last partial block, last stripe, two merges), implemented here from it.
//
// Parallel form used on the device: the accumulator update of one block is a sum mod 2^64
// (associative), so each block's contribution xxh3_block_contrib() can be computed
// independently; only the per-lane scramble between blocks is a chain:
//   acc_{b+1}[i] = scramble_i(acc_b[i] + contrib_b[i]).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"

namespace vosti::xxh3 {

inline constexpr int kStripeBytes = 64;
inline constexpr int kSecretBytes = 192;
inline constexpr int kStripesPerBlock = (kSecretBytes - kStripeBytes) / 8;  // 16
inline constexpr int kBlockBytes = kStripeBytes * kStripesPerBlock;         // 1024
inline constexpr int kLanes = 8;
inline constexpr size_t kMinLongBytes = 241;

inline constexpr uint64_t kPrime32_1 = 0x9E3779B1u;
inline constexpr uint64_t kPrime32_2 = 0x85EBCA77u;
inline constexpr uint64_t kPrime32_3 = 0xC2B2AE3Du;
inline constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ull;
inline constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4Full;
inline constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ull;
inline constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ull;
inline constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ull;

// The 192 secret bytes (xxHash specification, "kSecret").
#define VOSTI_XXH3_SECRET_BYTES                                                                                       \
  {                                                                                                                   \
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, 0xde, 0xd4, 0x6d, \
        0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc,   \
        0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24,   \
        0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88,   \
        0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef,   \
        0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7,   \
        0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73,   \
        0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17,   \
        0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe,   \
        0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95,   \
        0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e                                              \
  }

VOSTI_HD uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int b = 7; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}

// Eight input bytes at p, little-endian. REQUIRES: p 4-byte aligned (inputs are f32 rows).
VOSTI_HD uint64_t load_input64(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  const auto* q = reinterpret_cast<const uint32_t*>(p);
  return static_cast<uint64_t>(q[0]) | (static_cast<uint64_t>(q[1]) << 32);
#else
  return read_le64(p);
#endif
}

// The secret's 24 aligned words: word k holds bytes [8k, 8k + 8). The block loop reads only these.
struct SecretWords {
  uint64_t w[kSecretBytes / 8];
};
VOSTI_HD SecretWords secret_words(const uint8_t* secret_bytes) {
  SecretWords s{};
  for (int k = 0; k < kSecretBytes / 8; ++k) s.w[k] = read_le64(secret_bytes + 8 * k);
  return s;
}

VOSTI_HD uint64_t mul_fold64(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return (a * b) ^ __umul64hi(a, b);
#else
  // The high word of the 128-bit product from 32-bit halves (portable C++).
  const uint64_t a_lo = a & 0xffffffffull, a_hi = a >> 32, b_lo = b & 0xffffffffull, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffull) + lo_hi;
  const uint64_t high = (hi_lo >> 32) + (cross >> 32) + hi_hi;
  return (a * b) ^ high;
#endif
}

VOSTI_HD uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  h ^= h >> 32;
  return h;
}

// The initial accumulators.
VOSTI_HD void init_acc(uint64_t (&acc)[kLanes]) {
  acc[0] = kPrime32_3;
  acc[1] = kPrime64_1;
  acc[2] = kPrime64_2;
  acc[3] = kPrime64_3;
  acc[4] = kPrime64_4;
  acc[5] = kPrime32_2;
  acc[6] = kPrime64_5;
  acc[7] = kPrime32_1;
}

// One stripe's additions to lane `lane` (mod 2^64): the neighbouring lane's data and this
// lane's product keyed by `key_word` (the secret's 8 bytes for this stripe and lane).
VOSTI_HD uint64_t stripe_contrib(const uint8_t* stripe, uint64_t key_word, int lane) {
  const uint64_t own = load_input64(stripe + 8 * lane);
  const uint64_t key = own ^ key_word;
  const uint64_t other = load_input64(stripe + 8 * (lane ^ 1));
  return other + (key & 0xffffffffull) * (key >> 32);
}

// The scramble after each full block, on one lane (keyed by the secret's bytes [128 + 8 lane, ..)).
VOSTI_HD uint64_t scramble(uint64_t acc, const SecretWords& sw, int lane) {
  acc ^= acc >> 47;
  acc ^= sw.w[(kSecretBytes - kStripeBytes) / 8 + lane];
  return acc * kPrime32_1;
}

// Sum of stripe_contrib over stripes [0, num_stripes) of a block (stripe s keyed at byte 8 s).
VOSTI_HD uint64_t block_contrib(const uint8_t* block, int num_stripes, const SecretWords& sw, int lane) {
  uint64_t sum = 0;
  for (int s = 0; s < num_stripes; ++s) sum += stripe_contrib(block + s * kStripeBytes, sw.w[s + lane], lane);
  return sum;
}

VOSTI_HD uint64_t merge_accs(const uint64_t (&acc)[kLanes], const uint8_t* secret, uint64_t start) {
  uint64_t r = start;
  for (int i = 0; i < 4; ++i)
    r += mul_fold64(acc[2 * i] ^ read_le64(secret + 16 * i), acc[2 * i + 1] ^ read_le64(secret + 16 * i + 8));
  return avalanche(r);
}

// Number of full blocks the loop scrambles after: (len - 1) / 1024.
VOSTI_HD size_t num_full_blocks(size_t len) { return (len - 1) / kBlockBytes; }

// The tail after the full blocks: the stripes of the last partial block, then the last
// stripe (input + len - 64, keyed at secret + 121), then the two merges.
// REQUIRES: len >= kMinLongBytes; acc is the state after num_full_blocks(len) blocks.
VOSTI_HD void finish(uint64_t (&acc)[kLanes], const uint8_t* input, size_t len, const uint8_t* secret_bytes,
                     const SecretWords& sw, uint64_t* low, uint64_t* high) {
  const size_t nb = num_full_blocks(len);
  const int tail_stripes = static_cast<int>(((len - 1) - kBlockBytes * nb) / kStripeBytes);
  uint64_t add[kLanes];
  for (int i = 0; i < kLanes; ++i) {
    add[i] = block_contrib(input + nb * kBlockBytes, tail_stripes, sw, i);
    add[i] += stripe_contrib(input + len - kStripeBytes,
                             read_le64(secret_bytes + kSecretBytes - kStripeBytes - 7 + 8 * i), i);
  }
  for (int i = 0; i < kLanes; ++i) acc[i] += add[i];
  *low = merge_accs(acc, secret_bytes + 11, static_cast<uint64_t>(len) * kPrime64_1);
  *high = merge_accs(acc, secret_bytes + kSecretBytes - 64 - 11, ~(static_cast<uint64_t>(len) * kPrime64_2));
}

// The whole hash, sequentially (the host reference of the device kernel's parallel form).
// REQUIRES: len >= kMinLongBytes.
inline void hash128_long(const uint8_t* input, size_t len, const uint8_t* secret_bytes, uint64_t* low, uint64_t* high) {
  const SecretWords sw = secret_words(secret_bytes);
  uint64_t acc[kLanes];
  init_acc(acc);
  const size_t nb = num_full_blocks(len);
  for (size_t b = 0; b < nb; ++b)
    for (int i = 0; i < kLanes; ++i)
      acc[i] = scramble(acc[i] + block_contrib(input + b * kBlockBytes, kStripesPerBlock, sw, i), sw, i);
  finish(acc, input, len, secret_bytes, sw, low, high);
}

}  // namespace vosti::xxh3
