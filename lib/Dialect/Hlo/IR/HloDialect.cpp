//===- HloDialect.cpp - The hlo dialect -----------------------------------===//

#include "kiln/Dialect/Hlo/IR/HloOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln::hlo;

#include "kiln/Dialect/Hlo/IR/HloDialect.cpp.inc"
#include "kiln/Dialect/Hlo/IR/HloEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/Hlo/IR/HloAttrs.cpp.inc"

void HloDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kiln/Dialect/Hlo/IR/HloAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/Hlo/IR/HloOps.cpp.inc"
      >();
}
