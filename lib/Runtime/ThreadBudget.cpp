//===- ThreadBudget.cpp - The kernels' thread count for a scope -----------===//

#include "kiln/Runtime/ThreadBudget.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <thread>

namespace kiln {

ThreadBudget::ThreadBudget(std::optional<int> threads) {
  if (!threads)
    return;
  previous_ = current();
  // OpenBLAS's OpenMP build sets OpenMP's count with its own, and its own
  // must change too: it is what a GEMM outside a team reads.
  openblas_set_num_threads(*threads);
}

ThreadBudget::~ThreadBudget() {
  if (previous_)
    openblas_set_num_threads(*previous_);
}

ThreadBudget ThreadBudget::allCores() {
  return ThreadBudget(std::max(1, int(std::thread::hardware_concurrency())));
}

ThreadBudget ThreadBudget::threads(int threads) {
  return ThreadBudget(threads > 0 ? std::optional<int>(threads) : std::nullopt);
}

int ThreadBudget::current() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return openblas_get_num_threads(); // built without OpenMP: the fuzzers
#endif
}

bool ThreadBudget::blasSharesTheOpenMpPool() {
  constexpr int kOpenMpBuild = 2; // openblas_get_parallel: 0 serial, 1 pthreads
  return openblas_get_parallel() == kOpenMpBuild;
}

} // namespace kiln
