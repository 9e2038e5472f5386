//===- SgemmTiming.h - Seconds of one sgemm of a shape, measured -*- C++ -*-===//
//
// OpenBLAS's rate on one machine swings by 3x with the shape (a thin chunk
// of logits against a square block), so the cpu target times each GEMM a
// step issues at its own shape instead of scaling one 2048^3 probe.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SGEMMTIMING_H
#define KILN_RUNTIME_SGEMMTIMING_H

#include <cstdint>

namespace kiln {

/// A row-major cblas_sgemm: C[m, n] = op(A)[m, k] op(B)[k, n] (+ C).
struct SgemmCall {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false, accumulate = false;
};

/// Seconds of one such sgemm on this machine with `threads` OpenBLAS threads
/// (<= 0: the process's own): the median of 3 to 20 timed runs (at least
/// 0.1 s of them where 20 allow) after a warm-up run, each with its operands
/// out of cache (as a step's mostly are); measured on
/// first use and kept per shape and thread count for the process (and in the
/// file KILN_CPU_MEASUREMENTS names, for later ones). A call above
/// 2 GFLOP is timed with its largest dimensions cut (to no less than 256)
/// and scaled up by its FLOPs, so that planning a large model on the cpu
/// target stays within seconds.
double sgemmSeconds(const SgemmCall &call, int threads = 0);

/// The call sgemmSeconds times for `call`: itself up to 2 GFLOP, else with
/// its largest dimension cut (repeatedly, to no less than 256) to 2 GFLOP.
SgemmCall sgemmTimedShape(SgemmCall call);

} // namespace kiln

#endif // KILN_RUNTIME_SGEMMTIMING_H
