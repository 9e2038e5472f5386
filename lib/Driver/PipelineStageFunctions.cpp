//===- PipelineStageFunctions.cpp - A microbatch's stage functions --------===//

#include "kiln/Driver/PipelineStageFunctions.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Driver/Training.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"

#include <fmt/format.h>

namespace kiln {

mlir::OwningOpRef<mlir::ModuleOp> captureStageFunctions(mlir::MLIRContext &context,
                                                        const Qwen3Config &model,
                                                        const ParallelLayout &layout, int64_t seq,
                                                        const KilnPipelineOptions &options) {
  auto module = captureTrainingStep(context, model, {layout.microbatchSize, seq}, options,
                                    LoweringStage::Forward);
  mlir::PassManager pm(&context);
  std::vector<std::string> starts;
  for (int64_t s = 1; s < layout.stages.numStages(); ++s)
    starts.push_back(layout.stages.modules[s].front());
  buildPipelineStagesPipeline(pm, options, starts);
  succeedOrFail(context, "pipeline stage functions", [&] { return pm.run(*module); });
  return module;
}

namespace {

int64_t bytesOf(mlir::Type type) {
  auto tensor = mlir::cast<mlir::RankedTensorType>(type);
  return tensor.getNumElements() * int64_t(tensor.getElementTypeBitWidth() / 8);
}

} // namespace

mlir::func::FuncOp stageFunction(mlir::ModuleOp module, int64_t stage, llvm::StringRef part) {
  std::string name = fmt::format("loss_stage{}_{}", stage, part.str());
  auto fn = module.lookupSymbol<mlir::func::FuncOp>(name);
  if (!fn)
    fail("pipeline stage functions: no @{}", name);
  return fn;
}

std::vector<StageFootprint> stageFootprints(mlir::ModuleOp module, int64_t numStages) {
  std::vector<StageFootprint> footprints(numStages);
  for (int64_t s = 0; s < numStages; ++s) {
    mlir::func::FuncOp forward = stageFunction(module, s, "forward"),
                       backward = stageFunction(module, s, "backward");
    mlir::Operation *ret = forward.getBody().front().getTerminator();
    // A view (a reshape) of a kept value shares its bytes: count each buffer once.
    llvm::DenseSet<mlir::Value> buffers;
    for (unsigned i = 0; i < forward.getNumResults(); ++i) {
      int64_t bytes = bytesOf(forward.getResultTypes()[i]);
      if (forward.getResultAttr(i, kTransferAttr))
        footprints[s].sentBytes += bytes;
      if (!forward.getResultAttr(i, kResidualAttr))
        continue;
      mlir::Value root = ret->getOperand(i);
      while (auto view = root.getDefiningOp<mlir::ViewLikeOpInterface>())
        root = view.getViewSource();
      if (buffers.insert(root).second)
        footprints[s].residualBytes += bytes;
    }
    // A received activation the backward reads is kept until it runs, too.
    for (unsigned i = 0; i < backward.getNumArguments(); ++i)
      if (backward.getArgAttr(i, kTransferAttr))
        footprints[s].residualBytes += bytesOf(backward.getArgumentTypes()[i]);
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (auto key = forward.getArgAttrOfType<mlir::StringAttr>(i, kParamAttr))
        footprints[s].parameterBytes[key.str()] = bytesOf(forward.getArgumentTypes()[i]);
  }
  return footprints;
}

} // namespace kiln
