//===- CheckCase.h - What kiln check-kernel needs of a kernel ---*- C++ -*-===//
//
// Every custom kernel states its check case: named dimensions, the inputs of
// the op(s) it replaces and how to build them. kiln check-kernel
// (lib/Driver/KernelCheck.cpp) substitutes the kernel into that reference
// and compares the two.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_CUSTOMKERNELS_CHECKCASE_H
#define KILN_CUSTOMKERNELS_CHECKCASE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// Named dimensions of a check case, e.g. {"batch", 2}, {"seq", 256}.
using KernelCheckShape = std::vector<std::pair<std::string, int64_t>>;

class CheckableKernel {
public:
  virtual ~CheckableKernel() = default;

  /// Named dimensions and their defaults.
  virtual KernelCheckShape checkShape() const = 0;
  /// What the replaced op(s) cannot take in `shape` ("heads=4 is not a
  /// multiple of kv_heads=3"), or "" when they can: checked before building,
  /// since an op whose result type cannot be inferred aborts the process.
  virtual std::string checkShapeProblem(const KernelCheckShape &) const { return ""; }
  /// One input of the replaced op(s): floats drawn from normal(0, 1), or
  /// integers in [0, idBound) (`distinctPerRow`: distinct along the last
  /// dimension, as a router's top-k).
  struct CheckInput {
    std::string name;
    mlir::RankedTensorType type;
    int64_t idBound = 0; ///< 0: a float input
    bool distinctPerRow = false;
  };
  virtual llvm::SmallVector<CheckInput> checkInputs(mlir::MLIRContext *context,
                                                    const KernelCheckShape &shape) const = 0;
  /// A result the check compares: its name in the report, and whether a
  /// cotangent flows into it (not into saved values such as attention's
  /// log-sum-exp).
  struct CheckResult {
    mlir::Value value;
    std::string name;
    bool differentiable = true;
  };
  /// Builds the replaced op(s) on `inputs` with module path `fqn`.
  virtual llvm::SmallVector<CheckResult> buildReference(mlir::OpBuilder &b, mlir::Location loc,
                                                        mlir::ValueRange inputs,
                                                        const KernelCheckShape &shape,
                                                        mlir::StringAttr fqn) const = 0;
};

} // namespace kiln

#endif // KILN_CUSTOMKERNELS_CHECKCASE_H
