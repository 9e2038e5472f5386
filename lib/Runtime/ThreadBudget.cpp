//===- ThreadBudget.cpp - OpenMP and OpenBLAS thread counts for a scope ---===//

#include "kiln/Runtime/ThreadBudget.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <thread>

namespace kiln {

// Built without OpenMP (the fuzzers), a process has one OpenMP thread and
// nothing to set.
#ifndef _OPENMP
static int omp_get_max_threads() { return 1; }
static void omp_set_num_threads(int) {}
#endif

ThreadBudget::ThreadBudget(std::optional<int> openMp, std::optional<int> blas) {
  if (openMp) {
    previousOpenMp_ = omp_get_max_threads();
    omp_set_num_threads(*openMp);
  }
  if (blas) {
    previousBlas_ = openblas_get_num_threads();
    openblas_set_num_threads(*blas);
  }
}

ThreadBudget::~ThreadBudget() {
  if (previousOpenMp_)
    omp_set_num_threads(*previousOpenMp_);
  if (previousBlas_)
    openblas_set_num_threads(*previousBlas_);
}

ThreadBudget ThreadBudget::allCores() {
  int cores = std::max(1, int(std::thread::hardware_concurrency()));
  return ThreadBudget(cores, cores);
}

ThreadBudget ThreadBudget::threads(int threads) {
  if (threads <= 0)
    return ThreadBudget(std::nullopt, std::nullopt);
  return ThreadBudget(threads, threads);
}

ThreadBudget ThreadBudget::blasSingleThreaded() { return ThreadBudget(std::nullopt, 1); }

int ThreadBudget::openMpThreads() { return omp_get_max_threads(); }

int ThreadBudget::blasThreads() { return openblas_get_num_threads(); }

} // namespace kiln
