//===- MemoryPlan.h - Static live-memory plan of a kiln function -*- C++ -*-===//
//
// Replays a function's op order with the eager executor's rules, from types
// alone: a value is live from its definition (arguments: from the start) to
// its last use, values with no use never occupy memory, a reshape shares its
// input's buffer, and a result an op may write in place
// (CpuKernelOpInterface::getInPlaceOperand) takes over its donor operand's
// buffer when that operand dies there unaliased. With the arguments moved in
// (as the Trainer does), the peak it predicts is exactly what the executor's
// ExecutionStats::peakLiveBytes measures for the same function.
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
  int64_t gradientBytes = 0;    ///< one gradient per parameter (= parameterBytes)
  /// Peak of bytes held by intermediate values (not arguments), e.g.
  /// activations saved for the backward plus gradients in flight.
  int64_t peakIntermediateBytes = 0;
  /// Bytes of the forward results the backward reads (tagged kiln.saved by
  /// kiln-autodiff), each buffer counted once: the activation memory.
  int64_t savedActivationBytes = 0;
};

MemoryPlan planMemory(mlir::func::FuncOp fn);

} // namespace kiln

#endif // KILN_PLANNER_MEMORYPLAN_H
