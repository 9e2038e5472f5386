//===- kiln-opt.cpp - MLIR optimizer driver for the kiln dialect ----------===//
//
// Kiln's passes and the `kiln-training` pipeline, plus the upstream passes
// people reach for when reading or reducing IR (--canonicalize, --cse,
// --symbol-dce, --inline, ...).

#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  kiln::registerKilnPassesAndPipelines();
  mlir::registerTransformsPasses();
  mlir::DialectRegistry registry;
  registry.insert<kiln::KilnDialect, mlir::func::FuncDialect, mlir::shard::ShardDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
