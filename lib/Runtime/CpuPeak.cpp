//===- CpuPeak.cpp - This machine's attainable FLOP rate ------------------===//

#include "kiln/Runtime/CpuPeak.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace kiln {

namespace {
/// Best rate of `reps` n^3 sgemms; the first also warms caches and threads.
double bestSgemmRate(int n, int reps) {
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                b.data(), n, 0.0f, c.data(), n);
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    best = std::max(best, 2.0 * n * n * n / elapsed.count());
  }
  return best;
}
} // namespace

double measureCpuPeakFlops() {
  // Small GEMMs stay below the rate a training step's large ones reach (a
  // 1024^3 probe read ~100 GFLOP/s where the step ran at ~130), so the
  // probe also runs 2048^3, where OpenBLAS is at its blocking's full rate.
  static const double peak = std::max(bestSgemmRate(1024, 4), bestSgemmRate(2048, 3));
  return peak;
}

std::string describeMfu(double mfu, double peakFlops) {
  std::string text = fmt::format("{:.2f}%", 100 * mfu);
  if (mfu > 1.0)
    text += fmt::format(" (above 100%: the step's GEMMs ran faster than the {:.1f} GFLOP/s "
                        "sgemm probe measured at start-up, e.g. after clocks rose)",
                        peakFlops / 1e9);
  return text;
}

} // namespace kiln
