//===- MemoryPlan.h - Static live-memory plan of a kiln function -*- C++ -*-===//
//
// Sums the buffer sizes of a function's BufferLiveness events, from types
// alone. The CPU executor allocates, donates and frees by the same analysis,
// so with the arguments moved in (as the Trainer does) the peak predicted
// here is exactly what its ExecutionStats::peakLiveBytes measures.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PLANNER_MEMORYPLAN_H
#define KILN_PLANNER_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>

namespace kiln {

struct MemoryPlan {
  int64_t peakBytes = 0;        ///< all live buffers at the worst point
  int64_t argumentBytes = 0;    ///< every used argument (parameters, state, data)
  int64_t parameterBytes = 0;   ///< arguments tagged kiln.param
  int64_t stateBytes = 0;       ///< arguments tagged kiln.state (optimizer state)
  /// Gradients the function returns (kiln.grad results) or feeds to AdamW.
  int64_t gradientBytes = 0;
  /// Peak of bytes held by intermediate values (not arguments), e.g.
  /// activations saved for the backward plus gradients in flight.
  int64_t peakIntermediateBytes = 0;
  /// Bytes of the forward results the backward reads (tagged kiln.saved by
  /// kiln-autodiff), each buffer counted once: the activation memory.
  int64_t savedActivationBytes = 0;
};

/// Throws kiln::Error for a function without a single-block body.
MemoryPlan planMemory(mlir::func::FuncOp fn);

} // namespace kiln

#endif // KILN_PLANNER_MEMORYPLAN_H
