//===- Precision.h - Bytes of each value at a target's precision -*- C++ -*-===//
//
// Kiln's IR is float32 throughout; a target trains in mixed precision as
// torchtitan's FSDP2 does: sharded parameters (the master weights) and AdamW
// moments in float32, parameters gathered and activations computed in
// bfloat16, gradients reduced in float32. ValuePrecision says how many bytes
// each value of a step occupies under such a policy, so the memory plan, the
// roofline and the collectives all count the same bytes.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PLANNER_PRECISION_H
#define KILN_PLANNER_PRECISION_H

#include "kiln/Planner/TargetProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace kiln {

/// The gradients an optimizer step consumes: values returned as kiln.grad and
/// AdamW's gradient operands, each once.
llvm::DenseSet<mlir::Value> stepGradients(mlir::func::FuncOp fn);

/// stepGradients and, walking back through the ops that carry them to their
/// reduced form (shard collectives, kiln.pad of uneven shards, views), the
/// gradients in flight before their reductions.
llvm::DenseSet<mlir::Value> gradientValues(mlir::func::FuncOp fn);

class ValuePrecision {
public:
  ValuePrecision(mlir::func::FuncOp fn, const PrecisionPolicy &policy);

  /// Bytes per element of `value`:
  ///   non-float tensors keep their IR width;
  ///   kiln.param arguments: master; kiln.state arguments: optimizer;
  ///   a pipeline stage's kiln.transfer, kiln.cotangent and kiln.residual
  ///     arguments: compute;
  ///   gradientValues (FSDP2 casts a gradient to the reduce precision
  ///     before its reduce-scatter): reduce;
  ///   a result that may take over an operand's buffer (AdamW's new
  ///     parameter and moments): that operand's width;
  ///   every other float: compute.
  int64_t elementBytes(mlir::Value value) const;
  /// Bytes of a ranked tensor value at its element width (0 otherwise).
  int64_t bytes(mlir::Value value) const;
  /// Bytes of `values` together.
  int64_t bytes(mlir::ValueRange values) const;
  /// The run's Float8 linears.
  const PrecisionPolicy::Float8Linears &float8() const { return policy_.float8; }

private:
  PrecisionPolicy policy_;
  llvm::DenseSet<mlir::Value> reduced_;
};

} // namespace kiln

#endif // KILN_PLANNER_PRECISION_H
