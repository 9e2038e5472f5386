//===- CompiledStep.cpp - The hlo training step compiled for the CPU ------===//

#include "kiln/Driver/CompiledStep.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Driver/PipelineConfig.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <chrono>
#include <filesystem>

namespace kiln {

mlir::OwningOpRef<mlir::ModuleOp> extractHloStep(mlir::ModuleOp module) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>("train_step");
  mlir::OwningOpRef<mlir::ModuleOp> alone = mlir::ModuleOp::create(module.getLoc());
  alone->push_back(step.clone());
  return alone;
}

CompiledStep compileHloStep(mlir::ModuleOp hloStep, const std::string &what) {
  auto start = std::chrono::steady_clock::now();
  auto step = hloStep.lookupSymbol<mlir::func::FuncOp>("train_step");
  if (!step)
    fail("compiled mode: {} has no func.func @train_step", what);
  FunctionSignature signature = FunctionSignature::of(step);
  // Bufferization needs the upstream dialects' models on the module's context.
  mlir::DialectRegistry registry;
  registerCompiledModeInterfaces(registry);
  hloStep->getContext()->appendDialectRegistry(registry);
  KilnPipelineOptions options;
  runKilnPipeline(hloStep, options, PipelineStage::Llvm, PipelineStage::Hlo,
                  "compiled mode: lowering @train_step of " + what + " failed");
  CompiledStep compiled;
  compiled.lowerSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  compiled.function =
      std::make_unique<CompiledFunction>(hloStep, "train_step", std::move(signature));
  return compiled;
}

CompiledStep compileHloStep(const std::string &path) {
  auto start = std::chrono::steady_clock::now();
  if (!std::filesystem::exists(path))
    fail("compiled mode: '{}' does not exist (kiln compile writes it beside model.hlo.pb; "
         "compile again with this version)",
         path);
  mlir::DialectRegistry registry;
  registry.insert<hlo::HloDialect, mlir::func::FuncDialect>();
  registerCompiledModeInterfaces(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module;
  succeedOrFail(context, "compiled mode: '" + path + "' is not an hlo module", [&] {
    module = mlir::parseSourceFile<mlir::ModuleOp>(path, &context);
    return mlir::failure(!module);
  });
  CompiledStep compiled = compileHloStep(*module, "'" + path + "'");
  compiled.lowerSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
      compiled.function->compileSeconds();
  return compiled;
}

} // namespace kiln
