//===- KilnDialect.h - The kiln dialect -------------------------*- C++ -*-===//
#ifndef KILN_DIALECT_KILN_IR_KILNDIALECT_H
#define KILN_DIALECT_KILN_IR_KILNDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "kiln/Dialect/Kiln/IR/KilnDialect.h.inc"

namespace kiln {
/// Function-argument attribute holding a parameter's Hugging Face key, by
/// which checkpoints bind (e.g. "model.layers.0.mlp.gate_proj.weight").
inline constexpr llvm::StringLiteral kParamAttr = "kiln.param";
/// Function-argument attribute naming a data input ("tokens").
inline constexpr llvm::StringLiteral kInputAttr = "kiln.input";
/// Module attribute describing the captured model (a dictionary).
inline constexpr llvm::StringLiteral kModelAttr = "kiln.model";
} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_KILNDIALECT_H
