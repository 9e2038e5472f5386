//===- HloToLinalg.h - hlo -> linalg patterns, by op family -----*- C++ -*-===//
//
// The conversion patterns of kiln-convert-hlo-to-linalg, one file per op
// family (as upstream's *ToLinalg conversions are laid out), and the few
// builders they share.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_HLOTOLINALG_HLOTOLINALG_H
#define KILN_PASSES_HLOTOLINALG_HLOTOLINALG_H

#include "kiln/Dialect/Hlo/IR/HloOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/DialectConversion.h"

#include <functional>

namespace kiln::hlo_to_linalg {

/// hlo's types as the upstream dialects take them: ui32 becomes signless
/// i32 (arith is signless; each pattern keeps the unsigned meaning from the
/// hlo op's own types), everything else is unchanged.
class HloTypeConverter : public mlir::TypeConverter {
public:
  HloTypeConverter();
};

/// Elementwise: constant, iota, the unary and binary ops, convert, compare,
/// select (ElementwiseToLinalg.cpp).
void populateElementwisePatterns(const mlir::TypeConverter &converter,
                                 mlir::RewritePatternSet &patterns);
/// Data movement: broadcast_in_dim, reshape, transpose, slice,
/// dynamic_slice, concatenate, pad, opt_barrier (ShapeToLinalg.cpp).
void populateShapePatterns(const mlir::TypeConverter &converter,
                           mlir::RewritePatternSet &patterns);
/// dot_general and reduce (ContractionToLinalg.cpp).
void populateContractionPatterns(const mlir::TypeConverter &converter,
                                 mlir::RewritePatternSet &patterns);
/// custom_call as a call of the host (CustomCallToHost.cpp; the ABI in
/// kiln/Passes/HloToLinalg/HostCalls.h).
void populateCustomCallPatterns(const mlir::TypeConverter &converter,
                                mlir::RewritePatternSet &patterns);
/// The collectives and replica_id as calls of the host (CollectiveToHost.cpp;
/// the same ABI).
void populateCollectivePatterns(const mlir::TypeConverter &converter,
                                mlir::RewritePatternSet &patterns);
/// Declares `name(i64 x leadingArgs, memref<?xi64>)` with the C interface in
/// `module`, once: how compiled code calls the host (custom calls, sgemm).
void declareHostFunction(mlir::ModuleOp module, llvm::StringRef name, unsigned leadingArgs);

/// The i64 `words` in a stack table, as the host functions take them
/// (memref<?xi64>).
mlir::Value wordTable(mlir::OpBuilder &b, mlir::Location loc, mlir::ValueRange words);

/// Calls host function `name` with `leadingArgs` and a table of i64 words:
/// `words`, then the aligned data pointer of each input's buffer (dense,
/// row-major, read-only), then of each result's (allocated here, for the
/// host to write); returns the results as tensors of `resultTypes`.
llvm::SmallVector<mlir::Value> callHost(mlir::OpBuilder &b, mlir::Location loc,
                                        llvm::StringRef name, mlir::ValueRange leadingArgs,
                                        llvm::ArrayRef<int64_t> words, mlir::ValueRange inputs,
                                        mlir::TypeRange resultTypes);
/// float32 dot_general of the matmul form as the host's sgemm, ahead of
/// the linalg patterns (ContractionToBlas.cpp); declareBlasFunctions adds
/// kiln_sgemm to `module` when a dot will call it.
void populateBlasPatterns(const mlir::TypeConverter &converter,
                          mlir::RewritePatternSet &patterns);
void declareBlasFunctions(mlir::ModuleOp module);
/// gather and scatter (IndexingToLinalg.cpp).
void populateIndexingPatterns(const mlir::TypeConverter &converter,
                              mlir::RewritePatternSet &patterns);

//===-- Shared builders ---------------------------------------------------===//

using ScalarFn =
    std::function<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

/// A `linalg.generic` over `type` (all parallel) whose inputs have `type`'s
/// shape or are 0-d (broadcast), its body `fn` of their elements.
mlir::Value buildElementwise(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::RankedTensorType type, mlir::ValueRange inputs,
                             const ScalarFn &fn);

/// `tensor.empty` of `type` filled with `value` (a scalar).
mlir::Value buildFilled(mlir::OpBuilder &b, mlir::Location loc, mlir::RankedTensorType type,
                        mlir::Value value);

/// The element of a 0-d tensor.
mlir::Value extractScalar(mlir::OpBuilder &b, mlir::Location loc, mlir::Value tensor);

/// `combiner`(acc, x) on scalars of an element type whose signedness is
/// `isUnsigned` (i1: add/max is or, mul/min is and, as XLA's pred).
mlir::Value combineScalars(mlir::OpBuilder &b, mlir::Location loc, hlo::Combiner combiner,
                           mlir::Value acc, mlir::Value x, bool isUnsigned);

/// An integer scalar (any width) as an index, signed or unsigned as the
/// hlo type says, clamped into [0, upper].
mlir::Value clampedIndex(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                         bool isUnsigned, int64_t upper);

/// The converted type of an hlo value (a ranked tensor).
mlir::RankedTensorType convertedType(const mlir::TypeConverter *converter, mlir::Value value);

/// Whether the element type of an hlo value is unsigned (ui32).
bool isUnsignedElement(mlir::Type type);

} // namespace kiln::hlo_to_linalg

#endif // KILN_PASSES_HLOTOLINALG_HLOTOLINALG_H
