//===- kiln-opt.cpp - MLIR optimizer driver for the kiln dialect ----------===//
//
// Kiln's passes and pipelines (kiln-training, kiln-to-hlo, kiln-per-rank-to-hlo,
// kiln-hlo-to-llvm), plus the upstream passes
// people reach for when reading or reducing IR (--canonicalize, --cse,
// --symbol-dce, --inline, ...).

#include "kiln/CustomKernels/Registry.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Pipeline/KilnPipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#include <pthread.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Args {
  int argc;
  char **argv;
  int result = 1;
};

void *run(void *opaque) {
  auto *args = static_cast<Args *>(opaque);
  kiln::registerCustomKernels();
  kiln::registerKilnPassesAndPipelines();
  mlir::registerTransformsPasses();
  mlir::DialectRegistry registry;
  registry.insert<kiln::KilnDialect, kiln::hlo::HloDialect, mlir::func::FuncDialect,
                  mlir::shard::ShardDialect>();
  // Compiled mode's lowering (kiln-hlo-to-llvm) and the IR it prints.
  registry.insert<mlir::arith::ArithDialect, mlir::bufferization::BufferizationDialect,
                  mlir::cf::ControlFlowDialect, mlir::linalg::LinalgDialect,
                  mlir::LLVM::LLVMDialect, mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::scf::SCFDialect, mlir::tensor::TensorDialect>();
  kiln::registerCompiledModeInterfaces(registry);
  // A failing pass names the op in its message; MLIR would also print the
  // whole module after it ("see current operation"), thousands of lines for
  // a captured model. Off unless asked for on the command line.
  std::vector<char *> argv(args->argv, args->argv + args->argc);
  static char quiet[] = "--mlir-print-op-on-diagnostic=false";
  bool asked = false;
  for (char *arg : argv)
    asked |= std::string(arg).rfind("--mlir-print-op-on-diagnostic", 0) == 0;
  if (!asked)
    argv.insert(argv.begin() + 1, quiet);
  args->result = mlir::asMainReturnCode(mlir::MlirOptMain(
      int(argv.size()), argv.data(), "Kiln optimizer driver\n", registry));
  return nullptr;
}

} // namespace

int main(int argc, char **argv) {
  // MLIR's parser, verifier and printer recurse once per nesting level:
  // tens of thousands of nested attributes or modules overflow the main
  // thread's 8 MB stack. Run on a thread with 1 GiB of (lazily committed)
  // stack instead.
  constexpr size_t kStackBytes = size_t(1) << 30;
  Args args{argc, argv};
  pthread_attr_t attr;
  pthread_t thread;
  if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, kStackBytes) != 0 ||
      pthread_create(&thread, &attr, run, &args) != 0) {
    run(&args); // no big stack to be had: run as before
    return args.result;
  }
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return args.result;
}
