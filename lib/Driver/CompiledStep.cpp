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
  auto step = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  if (!step)
    fail("compiled mode: '{}' has no func.func @train_step", path);
  FunctionSignature signature = FunctionSignature::of(step);
  KilnPipelineOptions options;
  runKilnPipeline(*module, options, PipelineStage::Llvm, PipelineStage::Hlo,
                  "compiled mode: lowering @train_step of '" + path + "' failed");
  CompiledStep compiled;
  compiled.lowerSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  compiled.function =
      std::make_unique<CompiledFunction>(*module, "train_step", std::move(signature));
  return compiled;
}

} // namespace kiln
