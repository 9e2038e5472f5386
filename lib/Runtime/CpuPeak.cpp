//===- CpuPeak.cpp - This machine's attainable FLOP rate ------------------===//

#include "kiln/Runtime/CpuPeak.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <unistd.h>

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

double measureCpuMemoryBandwidth() {
  static const double bandwidth = [] {
    const size_t n = size_t(256) << 20 >> 2; // 256 MiB of floats
    std::vector<float> from(n, 1.0f), to(n, 0.0f);
    double best = 0;
    for (int rep = 0; rep < 4; ++rep) {
      auto start = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < n; ++i)
        to[i] = from[i] + float(rep);
      std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      best = std::max(best, 2.0 * double(n * sizeof(float)) / elapsed.count());
    }
    return best;
  }();
  return bandwidth;
}

int64_t physicalMemoryBytes() {
  return int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGESIZE));
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
