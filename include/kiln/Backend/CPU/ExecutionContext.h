//===- ExecutionContext.h - What a CPU kernel runs within --------*- C++ -*-===//
//
// Every CPU kernel receives the context of the program it runs in: which
// rank of how many it is, how many threads it may use, and the device grid
// whose communicators the collectives use. Substituted kernels (a kernel
// registry) join this struct, so kernels need no globals to reach them.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_CPU_EXECUTIONCONTEXT_H
#define KILN_BACKEND_CPU_EXECUTIONCONTEXT_H

namespace kiln {

class DeviceGrid;

struct ExecutionContext {
  int rank = 0;      ///< this process's rank in the world
  int worldSize = 1; ///< ranks running the same program
  /// Threads the kernels (OpenMP loops and OpenBLAS GEMMs) may use; 0 keeps
  /// the process default (OMP_NUM_THREADS or every core).
  int threads = 0;
  /// The ranks' grid and its communicators, for collectives; null for a
  /// single-process program.
  DeviceGrid *grid = nullptr;
};

} // namespace kiln

#endif // KILN_BACKEND_CPU_EXECUTIONCONTEXT_H
