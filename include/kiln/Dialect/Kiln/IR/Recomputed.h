//===- Recomputed.h - Ops activation checkpointing recomputes ---*- C++ -*-===//
//
// kiln-activation-checkpoint clones a checkpointed layer's forward ops into
// the backward and marks the copies, so that kiln-partition gathers their
// parameters once for the recomputation and the backward, and the planner
// can tell the recomputation's cost. The dialect verifies the attribute.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_RECOMPUTED_H
#define KILN_DIALECT_KILN_IR_RECOMPUTED_H

#include "mlir/IR/Operation.h"

namespace kiln {
/// Op attribute (unit): a backward-time copy of a forward op, recomputed
/// instead of saving the forward's results.
inline constexpr llvm::StringLiteral kRecomputedAttr = "kiln.recomputed";

inline bool isRecomputed(mlir::Operation *op) { return op->hasAttr(kRecomputedAttr); }
} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_RECOMPUTED_H
