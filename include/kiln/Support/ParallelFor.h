//===- ParallelFor.h - Independent items over a few worker threads -*- C++ -*-===//
//
// The layout search and kiln plan --validate plan independent runs (each in
// its own MLIR context): workers take the items in turn. The first failure
// stops the others taking more and is rethrown on the caller's thread once
// every worker has stopped.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_PARALLELFOR_H
#define KILN_SUPPORT_PARALLELFOR_H

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

/// Calls `body(i)` for every i in [0, count) on at most `workers` threads
/// (the caller's among them); rethrows the first exception a call threw.
template <typename Body> void parallelFor(size_t count, int64_t workers, Body body) {
  workers = std::max<int64_t>(1, std::min<int64_t>(workers, int64_t(count)));
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failureLock;
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> hold(failureLock);
        if (!failure)
          failure = std::current_exception();
        next = count;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int64_t w = 1; w < workers; ++w)
    threads.emplace_back(work);
  work();
  for (std::thread &t : threads)
    t.join();
  if (failure)
    std::rethrow_exception(failure);
}

} // namespace kiln

#endif // KILN_SUPPORT_PARALLELFOR_H
