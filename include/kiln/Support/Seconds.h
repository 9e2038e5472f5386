//===- Seconds.h - Elapsed wall time in seconds ------------------*- C++ -*-===//
//
// The phase times the commands print (capture, lower, compile, write).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_SECONDS_H
#define KILN_SUPPORT_SECONDS_H

#include <chrono>

namespace kiln {

using Clock = std::chrono::steady_clock;

/// Seconds from `start` to now.
inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

} // namespace kiln

#endif // KILN_SUPPORT_SECONDS_H
