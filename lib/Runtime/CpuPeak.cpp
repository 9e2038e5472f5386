//===- CpuPeak.cpp - This machine's attainable FLOP rate ------------------===//

#include "kiln/Runtime/CpuPeak.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace kiln {

double measureCpuPeakFlops() {
  static const double peak = [] {
    constexpr int n = 1024, reps = 8;
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
    double best = 0;
    for (int r = 0; r < reps; ++r) { // the first rep also warms caches and threads
      auto start = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                  b.data(), n, 0.0f, c.data(), n);
      std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      best = std::max(best, 2.0 * n * n * n / elapsed.count());
    }
    return best;
  }();
  return peak;
}

} // namespace kiln
