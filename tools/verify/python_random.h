// PythonRandom: the draws of CPython's random.Random (MT19937 seeded by init_by_array with the
// seed's 32-bit words, randrange by rejection on getrandbits(n.bit_length()), shuffle from the
// end), so that the paper protocol (paper_protocol.h) makes the same token ids and the same
// batch compositions as the paper's artifact, which draws them with Python's random module.
// Thread safety: a value type; one owner.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <utility>

namespace vosti {

class PythonRandom {
 public:
  // random.Random(seed) for a non-negative integer seed below 2^64.
  explicit PythonRandom(uint64_t seed) {
    const uint32_t low = static_cast<uint32_t>(seed), high = static_cast<uint32_t>(seed >> 32);
    const uint32_t words[2] = {low, high};
    init_by_array(std::span<const uint32_t>(words, high != 0 ? 2 : 1));
  }

  // getrandbits(32).
  uint32_t next_u32() {
    if (index_ >= kN) twist();
    uint32_t y = state_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }

  // randrange(n): uniform in [0, n). REQUIRES: 1 <= n < 2^32.
  uint32_t below(uint32_t n) {
    const int k = std::bit_width(n);  // n.bit_length()
    uint32_t r = next_u32() >> (32 - k);
    while (r >= n) r = next_u32() >> (32 - k);
    return r;
  }

  // shuffle(values) in place.
  template <typename T>
  void shuffle(std::span<T> values) {
    for (size_t i = values.size(); i-- > 1;) std::swap(values[i], values[below(static_cast<uint32_t>(i + 1))]);
  }

 private:
  static constexpr int kN = 624, kM = 397;

  void init_genrand(uint32_t s) {
    state_[0] = s;
    for (int i = 1; i < kN; ++i)
      state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
    index_ = kN;
  }

  void init_by_array(std::span<const uint32_t> key) {
    init_genrand(19650218u);
    int i = 1;
    size_t j = 0;
    for (size_t k = std::max<size_t>(kN, key.size()); k > 0; --k) {
      state_[i] =
          (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
      if (++i >= kN) {
        state_[0] = state_[kN - 1];
        i = 1;
      }
      if (++j >= key.size()) j = 0;
    }
    for (int k = kN - 1; k > 0; --k) {
      state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
      if (++i >= kN) {
        state_[0] = state_[kN - 1];
        i = 1;
      }
    }
    state_[0] = 0x80000000u;
  }

  void twist() {
    for (int i = 0; i < kN; ++i) {
      const uint32_t y = (state_[i] & 0x80000000u) | (state_[(i + 1) % kN] & 0x7fffffffu);
      state_[i] = state_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1u) != 0 ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }

  std::array<uint32_t, kN> state_{};
  int index_ = kN;
};

}  // namespace vosti
