//===- PipelineStageFunctions.cpp - A microbatch's stage functions --------===//

#include "kiln/Driver/PipelineStageFunctions.h"
#include "kiln/Config/PipelineSchedule.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Driver/Training.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Planner/Precision.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"

#include <fmt/format.h>

#include <optional>

namespace kiln {

mlir::OwningOpRef<mlir::ModuleOp> captureStageFunctions(mlir::MLIRContext &context,
                                                        const Qwen3Config &model,
                                                        const ParallelLayout &layout, int64_t seq,
                                                        const KilnPipelineOptions &options) {
  // Partitioned stages (FSDP, TP, EP inside a stage) take every data-parallel
  // rank's microbatch, as a per-rank step takes every rank's batch.
  bool partitioned = options.worldSize() > 1;
  int64_t rows = layout.microbatchSize * (partitioned ? layout.dataParallelDegree() : 1);
  auto module = captureTrainingStep(context, model, {rows, seq}, options, LoweringStage::Forward);
  mlir::PassManager pm(&context);
  std::vector<std::string> starts;
  for (int64_t s = 1; s < layout.stages.numStages(); ++s)
    starts.push_back(layout.stages.modules[s].front());
  buildPipelineStagesPipeline(pm, options, starts, layout.pp);
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

std::vector<StageFootprint> stageFootprints(mlir::ModuleOp module, int64_t numStages,
                                            const PrecisionPolicy *precision) {
  std::vector<StageFootprint> footprints(numStages);
  for (int64_t s = 0; s < numStages; ++s) {
    mlir::func::FuncOp forward = stageFunction(module, s, "forward"),
                       backward = stageFunction(module, s, "backward");
    std::optional<ValuePrecision> forwardWidths, backwardWidths;
    if (precision)
      forwardWidths.emplace(forward, *precision), backwardWidths.emplace(backward, *precision);
    auto bytes = [](const std::optional<ValuePrecision> &widths, mlir::Value value) {
      return widths ? widths->bytes(value) : bytesOf(value.getType());
    };
    mlir::Operation *ret = forward.getBody().front().getTerminator();
    // A view (a reshape) of a kept value shares its bytes: count each buffer once.
    llvm::DenseSet<mlir::Value> buffers;
    for (unsigned i = 0; i < forward.getNumResults(); ++i) {
      mlir::Value result = ret->getOperand(i);
      if (forward.getResultAttr(i, kTransferAttr))
        footprints[s].sentBytes += bytes(forwardWidths, result);
      if (!forward.getResultAttr(i, kResidualAttr))
        continue;
      mlir::Value root = result;
      while (auto view = root.getDefiningOp<mlir::ViewLikeOpInterface>())
        root = view.getViewSource();
      if (buffers.insert(root).second)
        footprints[s].residualBytes += bytes(forwardWidths, result);
    }
    // A received activation the backward reads is kept until it runs, too.
    for (mlir::BlockArgument arg : backward.getArguments())
      if (backward.getArgAttr(arg.getArgNumber(), kTransferAttr))
        footprints[s].residualBytes += bytes(backwardWidths, arg);
    for (mlir::BlockArgument arg : forward.getArguments())
      if (auto key = forward.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), kParamAttr))
        footprints[s].parameterBytes[key.str()] = bytes(forwardWidths, arg);
  }
  return footprints;
}

std::map<std::string, ParameterUsers> pipelineRanksUsing(mlir::ModuleOp module, int64_t numStages,
                                                         int64_t pp) {
  std::map<std::string, ParameterUsers> users;
  for (int64_t s = 0; s < numStages; ++s) {
    mlir::func::FuncOp backward = stageFunction(module, s, "backward");
    for (unsigned i = 0; i < backward.getNumResults(); ++i)
      if (auto key = backward.getResultAttrOfType<mlir::StringAttr>(i, kGradAttr)) {
        ParameterUsers &u = users[key.str()];
        u.ranks.insert(pipelineRankOf(s, pp));
        u.type = backward.getResultTypes()[i];
      }
  }
  return users;
}

mlir::func::FuncOp addPipelineUpdate(mlir::ModuleOp module, const KilnPipelineOptions &options,
                                     int64_t microbatches, int64_t pp, int64_t pipelineRank,
                                     llvm::ArrayRef<int64_t> gridShape,
                                     llvm::ArrayRef<std::string> axisNames,
                                     llvm::ArrayRef<int64_t> replicaAxes) {
  mlir::MLIRContext &context = *module.getContext();
  context.loadDialect<mlir::shard::ShardDialect>();
  // Partitioned stages already sit on the run's grid.
  if (!module->hasAttr(kGridAxesAttr)) {
    mlir::OpBuilder b(module.getBodyRegion());
    mlir::shard::GridOp::create(b, module.getLoc(), b.getStringAttr("grid"),
                                b.getDenseI64ArrayAttr(gridShape));
    llvm::SmallVector<llvm::StringRef> axes(axisNames.begin(), axisNames.end());
    module->setAttr(kGridAxesAttr, b.getStrArrayAttr(axes));
  }
  mlir::PassManager pm(&context);
  buildPipelineUpdatePipeline(pm, options, microbatches, pp, pipelineRank, replicaAxes);
  succeedOrFail(context, "pipeline rank " + std::to_string(pipelineRank) + "'s update",
                [&] { return pm.run(module); });
  auto update = module.lookupSymbol<mlir::func::FuncOp>("train_step");
  if (!update)
    fail("pipeline rank {}'s update: no @train_step", pipelineRank);
  return update;
}

} // namespace kiln
