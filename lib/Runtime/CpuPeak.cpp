//===- CpuPeak.cpp - This machine's attainable FLOP rate ------------------===//

#include "kiln/Runtime/CpuPeak.h"
#include "kiln/Runtime/MachineMeasurements.h"
#include "kiln/Runtime/ThreadBudget.h"

#include <cblas.h>
#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <vector>

#include <unistd.h>

namespace kiln {

namespace {
/// The rate of `work` (returning what it did) over `reps` runs after one
/// that warms caches and threads. Not the best single run: on a shared or
/// virtual machine the rate swings by 2x from one half-second to the next
/// (25 to 53 GFLOP/s seen), and a best run picks a burst that no training
/// step of seconds sustains.
template <typename Work>
double sustainedRate(int reps, Work work) {
  work();
  double done = 0;
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r)
    done += work();
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return done / elapsed.count();
}

/// 2048^3 sgemms, where OpenBLAS is at its blocking's full rate (a 1024^3
/// probe read ~100 GFLOP/s where a step's large GEMMs ran at ~130); about
/// 2 s in all.
double sgemmRate() {
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  return sustainedRate(4, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                b.data(), n, 0.0f, c.data(), n);
    return 2.0 * n * n * n;
  });
}

/// A threaded copy between two 256 MiB buffers (bytes read plus written).
double copyBandwidth() {
  const size_t n = size_t(256) << 20 >> 2;
  std::vector<float> from(n, 1.0f), to(n, 0.0f);
  float bump = 0;
  return sustainedRate(8, [&] {
    bump += 1;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i)
      to[i] = from[i] + bump;
    return 2.0 * double(n * sizeof(float));
  });
}

std::optional<CpuRates> &knownRates() {
  static std::optional<CpuRates> rates;
  return rates;
}

std::string &ratesSource() {
  static std::string source = "measured";
  return source;
}
} // namespace

CpuRates cpuRates() {
  std::optional<CpuRates> &rates = knownRates();
  if (!rates) {
    bool measured = false;
    auto measure = [&] {
      measured = true;
      // Every core for the probes (a rank under mpiexec runs with one thread
      // per core it was given).
      ThreadBudget cores = ThreadBudget::allCores();
      return CpuRates{sgemmRate(), copyBandwidth()};
    };
    MachineMeasurements *kept = MachineMeasurements::fromEnvironment();
    rates = kept ? kept->rates(measure) : measure();
    if (kept && !measured)
      ratesSource() = fmt::format("measured earlier, read from KILN_CPU_MEASUREMENTS={}",
                                  kept->path());
  }
  return *rates;
}

const std::string &cpuRatesSource() {
  cpuRates();
  return ratesSource();
}

void adoptCpuRates(CpuRates rates) { knownRates() = rates; }

double measureCpuPeakFlops() { return cpuRates().sgemmFlops; }

double measureCpuMemoryBandwidth() { return cpuRates().memoryBandwidth; }

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
