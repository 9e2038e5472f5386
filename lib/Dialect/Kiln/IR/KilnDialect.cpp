//===- KilnDialect.cpp - The kiln dialect ---------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

using namespace mlir;

#include "kiln/Dialect/Kiln/IR/KilnDialect.cpp.inc"

void kiln::KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"
      >();
}
