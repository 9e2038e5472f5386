//===- HloShapes.h - The result shape of each hlo op, once --------*- C++ -*-===//
//
// XLA's shape inference for the hlo ops whose result shape follows from
// their operands and attributes, written once (as StableHLO's
// TypeInference.cpp serves both its verifiers and its builders): each op's
// verifier checks its result against the rule, and kiln-lower-to-hlo's
// HloBuilder builds its result types with it. A rule that fails says why
// through `emit` (the op's emitOpError in a verifier, the builder's
// location in HloBuilder, where it is a bug).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_HLO_IR_HLOSHAPES_H
#define KILN_DIALECT_HLO_IR_HLOSHAPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeRange.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln::hlo {

/// Starts the diagnostic of a rule that fails.
using EmitShapeError = llvm::function_ref<mlir::InFlightDiagnostic()>;
using Shape = llvm::SmallVector<int64_t>;

/// `dims` are distinct dimensions of a rank-`rank` tensor ("<what> 3 is
/// outside a tensor of rank 2", "<what> lists dimension 1 twice").
mlir::LogicalResult checkDistinctDims(EmitShapeError emit, llvm::StringRef what,
                                      llvm::ArrayRef<int64_t> dims, int64_t rank);

mlir::FailureOr<Shape> transposeShape(mlir::RankedTensorType operand,
                                      llvm::ArrayRef<int64_t> permutation, EmitShapeError emit);
/// The inputs share rank and element type and every dimension but
/// `dimension`, which adds up.
mlir::FailureOr<Shape> concatenateShape(mlir::TypeRange inputs, int64_t dimension,
                                        EmitShapeError emit);
mlir::FailureOr<Shape> sliceShape(mlir::RankedTensorType operand, llvm::ArrayRef<int64_t> start,
                                  llvm::ArrayRef<int64_t> limit, llvm::ArrayRef<int64_t> strides,
                                  EmitShapeError emit);
/// `startIndices`: how many start index operands the op has.
mlir::FailureOr<Shape> dynamicSliceShape(mlir::RankedTensorType operand, size_t startIndices,
                                         llvm::ArrayRef<int64_t> sliceSizes, EmitShapeError emit);
mlir::FailureOr<Shape> padShape(mlir::RankedTensorType operand, mlir::RankedTensorType padding,
                                llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high,
                                llvm::ArrayRef<int64_t> interior, EmitShapeError emit);
/// Batch dimensions, then lhs's free dimensions, then rhs's.
mlir::FailureOr<Shape> dotGeneralShape(mlir::RankedTensorType lhs, mlir::RankedTensorType rhs,
                                       llvm::ArrayRef<int64_t> lhsBatch,
                                       llvm::ArrayRef<int64_t> rhsBatch,
                                       llvm::ArrayRef<int64_t> lhsContract,
                                       llvm::ArrayRef<int64_t> rhsContract,
                                       EmitShapeError emit);
/// The operand without `dimensions`; `init` a scalar of its element type.
mlir::FailureOr<Shape> reduceShape(mlir::RankedTensorType operand, mlir::RankedTensorType init,
                                   llvm::ArrayRef<int64_t> dimensions, EmitShapeError emit);
mlir::FailureOr<Shape> gatherShape(mlir::RankedTensorType operand, mlir::RankedTensorType indices,
                                   llvm::ArrayRef<int64_t> offsetDims,
                                   llvm::ArrayRef<int64_t> collapsedSliceDims,
                                   llvm::ArrayRef<int64_t> startIndexMap, int64_t indexVectorDim,
                                   llvm::ArrayRef<int64_t> sliceSizes, EmitShapeError emit);

} // namespace kiln::hlo

#endif // KILN_DIALECT_HLO_IR_HLOSHAPES_H
