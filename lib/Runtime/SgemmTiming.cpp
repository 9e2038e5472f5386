//===- SgemmTiming.cpp - Seconds of one sgemm of a shape, measured --------===//

#include "kiln/Runtime/SgemmTiming.h"
#include "kiln/Runtime/MachineMeasurements.h"
#include "kiln/Runtime/ThreadBudget.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace kiln {

namespace {

constexpr double kTimedFlops = 2e9;     ///< larger calls are timed cut down
constexpr int64_t kSmallestCut = 256;   ///< a cut dimension keeps at least this
constexpr double kMinSeconds = 0.1;     ///< timed runs add up to this...
constexpr int kMinRuns = 3, kMaxRuns = 20; ///< ...within these counts

double flopsOf(const SgemmCall &c) { return 2.0 * double(c.m) * double(c.n) * double(c.k); }

} // namespace

SgemmCall sgemmTimedShape(SgemmCall call) {
  while (flopsOf(call) > kTimedFlops) {
    int64_t *largest = &call.m;
    for (int64_t *d : {&call.n, &call.k})
      if (*d > *largest)
        largest = d;
    if (*largest <= kSmallestCut)
      break;
    double shrink = kTimedFlops / flopsOf(call);
    *largest = std::max(kSmallestCut, int64_t(double(*largest) * shrink));
  }
  return call;
}

namespace {

double timeCall(const SgemmCall &c) {
  // Normal, modest values: subnormals stall x86 GEMMs and a repeated
  // accumulation must not overflow.
  std::vector<float> a(size_t(c.m * c.k), 0.5f), b(size_t(c.k * c.n), 0.25f),
      out(size_t(c.m * c.n), 0.0f);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, c.transA ? CblasTrans : CblasNoTrans,
                c.transB ? CblasTrans : CblasNoTrans, int(c.m), int(c.n), int(c.k), 1.0f,
                a.data(), int(c.transA ? c.m : c.k), b.data(), int(c.transB ? c.k : c.n),
                c.accumulate ? 1.0f : 0.0f, out.data(), int(c.n));
  };
  // A step's GEMMs mostly find their operands out of cache (written by other
  // ops, on other cores, or evicted since): each timed run follows a read of
  // a buffer larger than the last-level cache. A read, so that no dirty
  // lines are left for the GEMM to write back; on this thread alone, so
  // that no worker of a team is still spinning after the read when the GEMM
  // needs its core (which read 4x slow under ASan).
  static const std::vector<float> sweep(size_t(64) << 18, 1.0f);
  float sink = 0;
  auto evict = [&] {
    float sum = 0;
    for (size_t i = 0; i < sweep.size(); i += 16) // one float per 64-byte line
      sum += sweep[i];
    sink += sum;
  };
  run();
  // The median run: robust to a run another process preempted, yet not the
  // luckiest one, which under mpiexec is the one the machine's other ranks
  // (timing the same shapes at the same moment, as their steps will run
  // them) happened to leave the memory bus to.
  std::vector<double> times;
  double elapsed = 0;
  while (times.size() < size_t(kMinRuns) ||
         (elapsed < kMinSeconds && times.size() < size_t(kMaxRuns))) {
    evict();
    auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    elapsed += times.back();
  }
  volatile float keep = sink; // the sweeps' reads are not dead code
  (void)keep;
  auto middle = times.begin() + times.size() / 2;
  std::nth_element(times.begin(), middle, times.end());
  return *middle;
}

} // namespace

double sgemmSeconds(const SgemmCall &call, int threads) {
  if (call.m <= 0 || call.n <= 0 || call.k <= 0)
    return 0;
  int count = threads > 0 ? threads : ThreadBudget::current();
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, int>;
  auto keyOf = [count](const SgemmCall &c) {
    return Key{c.m, c.n, c.k, c.transA, c.transB, c.accumulate, count};
  };
  static std::map<Key, double> known;
  static std::mutex lock;
  std::lock_guard<std::mutex> hold(lock);
  Key key = keyOf(call);
  auto it = known.find(key);
  if (it != known.end())
    return it->second; // the planner asks once per op: no thread change here
  SgemmCall timed = sgemmTimedShape(call);
  auto measured = known.find(keyOf(timed));
  if (measured == known.end()) {
    auto time = [&] {
      ThreadBudget budget = ThreadBudget::threads(threads);
      return timeCall(timed);
    };
    MachineMeasurements *kept = MachineMeasurements::fromEnvironment();
    double seconds =
        kept ? kept->gemmSeconds(fmt::format("{}x{}x{} {}{}{} {} threads", timed.m, timed.n,
                                             timed.k, timed.transA ? 'T' : 'N',
                                             timed.transB ? 'T' : 'N',
                                             timed.accumulate ? " +C" : "", count),
                                 time)
             : time();
    measured = known.emplace(keyOf(timed), seconds).first;
  }
  double seconds = measured->second * (flopsOf(call) / flopsOf(timed));
  known.emplace(key, seconds);
  return seconds;
}

} // namespace kiln
