//===- KilnOps.h - kiln dialect ops -----------------------------*- C++ -*-===//
#ifndef KILN_DIALECT_KILN_IR_KILNOPS_H
#define KILN_DIALECT_KILN_IR_KILNOPS_H

#include "kiln/Dialect/Kiln/IR/GemmShape.h"
#include "kiln/Dialect/Kiln/IR/KernelSpec.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/OpClass.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace kiln {
/// Total bytes of the ranked tensors among `types` (others count 0).
int64_t tensorBytes(mlir::TypeRange types);

/// The module a value belongs to: its defining op's `fqn`, or for a function
/// argument (a parameter) the `fqn` of its first user that has one, which
/// owns it (a tied embedding belongs to tok_embeddings, not to the output
/// projection). Empty when no such op has an `fqn`.
llvm::StringRef owningModule(mlir::Value value);

/// The torchtitan path of a parameter (a function argument): its owning
/// module, plus the weight's name where one op holds several (a MoE layer's
/// "layers.0.moe.experts.w1"), so tensor-parallel plans can name each.
std::string parameterPath(mlir::Value param);

/// FLOPs of `rows` tokens through one SwiGLU expert of `hidden` -> `inter`
/// -> `hidden` (the grouped experts' forward).
double expertFlops(double rows, int64_t hidden, int64_t inter);

/// FLOPs of kiln.attention (or, `backward`, its backward) over q of
/// [batch, seq, heads, headDim], with or without the causal mask; with
/// `queries` >= 0, q is a block of that many rows of the seq keys.
double attentionFlops(int64_t batch, int64_t seq, int64_t heads, int64_t headDim, bool causal,
                      bool backward, int64_t queries = -1);

/// The cotangent `grad`, or, when none flows back (a result nobody
/// differentiates through), a kiln.constant of zeros of `like`'s type named
/// `<op's fqn>.zero_grad`. For VJPs whose backward takes every cotangent.
mlir::Value gradOrZeros(mlir::OpBuilder &b, mlir::Operation *op, mlir::Value grad,
                        mlir::Value like);

/// Verifies that an op's `fqn` attribute, its torchtitan module path, is a
/// non-empty string: override rules, names of backward ops and diagnostics
/// all go by it.
mlir::LogicalResult verifyModulePath(mlir::Operation *op);

template <typename ConcreteType>
class HasModulePath : public mlir::OpTrait::TraitBase<ConcreteType, HasModulePath> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) { return verifyModulePath(op); }
};
} // namespace kiln

#include "kiln/Dialect/Kiln/IR/ClosedSetParameter.h"
#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnAttrs.h.inc"

#include "kiln/Dialect/Kiln/IR/KilnInterfaces.h.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.h.inc"

#endif // KILN_DIALECT_KILN_IR_KILNOPS_H
