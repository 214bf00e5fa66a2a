// The non-virtual helpers of kernels/kernel_backend.h.
#include "kernels/kernel_backend.h"

#include "kernels/ref/scalar_math.h"

namespace vosti {

F32Matrix::F32Matrix(const float* w, int64_t n, int64_t k) : rows(static_cast<size_t>(n)) {
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = reinterpret_cast<const uint8_t*>(w + i * k);
  part = WeightRows{WeightType::kF32, n, rows.data()};
  matrix = WeightMatrix{n, k, &part, 1};
}

void KernelBackend::rope(float* x, int64_t m, int num_heads, int head_dim, const int32_t* positions,
                         const float* inv_freq, RopeLayout layout) {
  const int half = head_dim / 2;
  std::vector<float> cos(static_cast<size_t>(m * half)), sin(cos.size());  // [m, half]
  for (int64_t r = 0; r < m; ++r)
    rope_cos_sin(positions[r], inv_freq, half, cos.data() + r * half, sin.data() + r * half);
  rope(x, m, num_heads, head_dim, cos.data(), sin.data(), layout);
}

}  // namespace vosti
