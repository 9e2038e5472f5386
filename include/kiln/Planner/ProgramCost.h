//===- ProgramCost.h - Static cost of a kiln function -----------*- C++ -*-===//
#ifndef KILN_PLANNER_PROGRAMCOST_H
#define KILN_PLANNER_PROGRAMCOST_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <map>
#include <string>

namespace kiln {

struct ProgramCost {
  /// A double, as CostOpInterface's: a global step of a large model passes
  /// int64 (bytes stay int64: tensors have at most 2^50 elements).
  double flops = 0;
  int64_t bytesRead = 0;
  int64_t bytesWritten = 0;
  int64_t parameterBytes = 0;  ///< arguments tagged kiln.param
  int64_t parameterCount = 0;  ///< elements of those arguments
  std::map<std::string, int64_t> opCounts; ///< op name -> occurrences
};

/// Sums the CostOpInterface of every op in `fn`.
ProgramCost programCost(mlir::func::FuncOp fn);

} // namespace kiln

#endif // KILN_PLANNER_PROGRAMCOST_H
