// A/B of the one-row matmul kernel builds (AVX2 vs AVX-512VL) on a random Q4_1 / Q8_0 /
// Q4_K / Q6_K matrix, interleaved, thread CPU time (minimum): the experiment behind matmul_rows_avx512.cc.
//   g++ -DVOSTI_SOURCE_DIR='"."' -O3 -std=c++20 -march=x86-64-v3 -ffp-contract=off -I src -I . \
//     dev/cpu/row_kernel_ab.cc build/src/libvosti_kernels_cpu.a build/src/libvosti_kernels_ref.a \
//     build/src/libvosti_io.a build/src/libvosti_core.a -lfmt -lgtest -o /tmp/row_kernel_ab
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <vector>

#include "core/quant_blocks.h"
#include "kernels/cpu/matmul_avx2.h"
#include "tests/model/quant_models.h"

using namespace vosti;

int main() {
  for (WeightType t : {WeightType::kQ4_1, WeightType::kQ8_0, WeightType::kQ4_K, WeightType::kQ6_K}) {
    const int64_t n = 3072, k = 1536;
    vosti::testing::SplitMix64 rng(1);
    const std::string bytes = vosti::testing::random_weight_bytes(t, n, k, rng);
    std::vector<const uint8_t*> rows;
    for (int64_t r = 0; r < n; ++r)
      rows.push_back(reinterpret_cast<const uint8_t*>(bytes.data()) + r * row_bytes(t, k));
    const WeightRows part{t, n, rows.data()};
    std::vector<float> x(static_cast<size_t>(k), 0.5f), y(static_cast<size_t>(n));
    std::vector<double> a, b;
    for (int rep = 0; rep < 41; ++rep) {
      for (int which = 0; which < 2; ++which) {
        timespec t0{}, t1{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        for (int i = 0; i < 5; ++i) {
          if (which == 0)
            matmul_row_columns_avx2(x.data(), k, part, nullptr, y.data(), 0, n);
          else
            matmul_row_columns_avx512(x.data(), k, part, nullptr, y.data(), 0, n);
        }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        const double s = ((t1.tv_sec - t0.tv_sec) + 1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec)) / 5;
        (which == 0 ? a : b).push_back(s);
      }
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    // Thread CPU time, minimum over repetitions: the least disturbed run on a shared machine.
    std::printf("type %d: avx2 %.3f ms, avx512 %.3f ms (%.2f vs %.2f Gweights/s)\n", static_cast<int>(t), a[0] * 1e3,
                b[0] * 1e3, n * k / a[0] / 1e9, n * k / b[0] / 1e9);
  }
}
