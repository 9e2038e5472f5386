//===- HloOps.h - The hlo dialect (XLA HLO mirror) ---------------*- C++ -*-===//
#ifndef KILN_DIALECT_HLO_IR_HLOOPS_H
#define KILN_DIALECT_HLO_IR_HLOOPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kiln/Dialect/Hlo/IR/HloDialect.h.inc"
#include "kiln/Dialect/Hlo/IR/HloEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/Hlo/IR/HloAttrs.h.inc"

#include "kiln/Dialect/Hlo/IR/HloOpInterfaces.h.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/Hlo/IR/HloOps.h.inc"

#endif // KILN_DIALECT_HLO_IR_HLOOPS_H
