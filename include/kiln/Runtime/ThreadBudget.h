//===- ThreadBudget.h - OpenMP and OpenBLAS thread counts for a scope -*- C++ -*-===//
//
// Kernels thread in two pools: OpenMP teams for elementwise and per-row
// loops, and OpenBLAS's own threads inside GEMMs. A ThreadBudget sets either
// count or both for the scope it lives in and restores what each was on
// destruction, so a run, a probe or a kernel can change them without
// leaking its choice to the caller.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_THREADBUDGET_H
#define KILN_RUNTIME_THREADBUDGET_H

#include <optional>

namespace kiln {

class ThreadBudget {
public:
  /// Every core of the machine for both pools (a rank under mpiexec may have
  /// been given fewer).
  static ThreadBudget allCores();
  /// `threads` for both pools; 0 or less leaves both as they are.
  static ThreadBudget threads(int threads);
  /// OpenBLAS on one thread, OpenMP as it is: for GEMMs issued from inside
  /// an OpenMP team, which OpenBLAS's pthread build would otherwise
  /// serialise on its level-3 lock.
  static ThreadBudget blasSingleThreaded();

  ~ThreadBudget();
  ThreadBudget(const ThreadBudget &) = delete;
  ThreadBudget &operator=(const ThreadBudget &) = delete;

  /// The counts now in effect: OpenMP's team size and OpenBLAS's threads.
  static int openMpThreads();
  static int blasThreads();

private:
  /// Sets the pools given a count; nullopt leaves one alone.
  ThreadBudget(std::optional<int> openMp, std::optional<int> blas);

  std::optional<int> previousOpenMp_, previousBlas_;
};

} // namespace kiln

#endif // KILN_RUNTIME_THREADBUDGET_H
