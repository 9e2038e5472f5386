//===- ThreadBudget.h - The kernels' thread count for a scope ----*- C++ -*-===//
//
// Kernels thread in one pool: OpenMP teams run the elementwise and per-row
// loops, and Kiln links OpenBLAS's OpenMP build, whose GEMMs take the same
// team (omp_get_max_threads() threads outside a parallel region, the calling
// thread alone inside one). With OpenBLAS's pthread build the two pools
// waited actively on each other's cores: a 1-rank step ran 1.1x to 1.5x
// slower (docs/planner.md#cpu-calibration). A ThreadBudget sets the count
// for the scope it lives in and restores it on destruction, so a run or a
// probe can change it without leaking its choice to the caller.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_THREADBUDGET_H
#define KILN_RUNTIME_THREADBUDGET_H

#include <optional>

namespace kiln {

class ThreadBudget {
public:
  /// Every core of the machine (a rank under mpiexec may have been given
  /// fewer).
  static ThreadBudget allCores();
  /// `threads` threads; 0 or less leaves the count as it is.
  static ThreadBudget threads(int threads);

  ~ThreadBudget();
  ThreadBudget(const ThreadBudget &) = delete;
  ThreadBudget &operator=(const ThreadBudget &) = delete;

  /// The count now in effect: an OpenMP team's size and a GEMM's threads.
  static int current();
  /// Whether the OpenBLAS this process loaded is the OpenMP build CMake
  /// links (a pthread build put first on the library path is not).
  static bool blasSharesTheOpenMpPool();

private:
  explicit ThreadBudget(std::optional<int> threads);

  std::optional<int> previous_;
};

} // namespace kiln

#endif // KILN_RUNTIME_THREADBUDGET_H
