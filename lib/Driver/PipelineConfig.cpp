//===- PipelineConfig.cpp - A run config as pipeline options --------------===//

#include "kiln/Driver/PipelineConfig.h"
#include "kiln/CustomKernels/Registry.h"
#include "kiln/Frontend/Qwen3Naming.h"
#include "kiln/Runtime/LrSchedule.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/Pass/PassManager.h"

#include <optional>

namespace kiln {

std::unique_ptr<KilnPipelineOptions> pipelineOptions(const TrainConfig &c, const Qwen3Config &model,
                                                     const ParallelLayout *layout,
                                                     PrecisionDtype defaultParamDtype,
                                                     TargetName defaultTarget) {
  auto o = std::make_unique<KilnPipelineOptions>();
  o->inlineRules = c.overrideRules();
  o->target = c.target.nameOr(defaultTarget);
  o->lnc = c.target.lnc;
  o->paramDtype = c.training.paramDtypeOr(defaultParamDtype);
  o->reduceDtype = c.training.mixedPrecisionReduce;
  o->checkpointMode = c.activationCheckpoint.mode;
  o->selectiveAcOption = c.activationCheckpoint.selectiveAcOption;
  o->lr = c.optimizer.lr;
  o->beta1 = c.optimizer.betas[0];
  o->beta2 = c.optimizer.betas[1];
  o->eps = c.optimizer.eps;
  o->weightDecay = c.optimizer.weightDecay;
  o->maxNorm = c.training.maxNorm;
  LrPhases phases = lrPhases(c.training.steps, c.lrScheduler.warmupSteps, c.lrScheduler.decayRatio);
  o->warmupSteps = phases.warmup;
  o->stableSteps = phases.stable;
  o->decaySteps = phases.decay;
  o->decayType = c.lrScheduler.decayType;
  o->minLrFactor = c.lrScheduler.minLrFactor;
  o->loadBalanceCoeff = model.loadBalanceCoeff;
  o->microbatches = c.training.microbatches(layout ? layout->dataParallelDegree() : 1);
  if (!layout)
    return o;
  if (layout->pp > 1)
    fail("parallelism.pipeline_parallel_degree={}: kiln train runs pipeline stages on CPU "
         "ranks, but no whole step compiles or plans with pipeline parallelism yet",
         layout->pp);
  o->expertDispatch = layout->expertDispatch;
  o->capacityFactor = layout->capacityFactor;
  o->dpReplicate = layout->dpReplicate;
  o->dpShard = layout->dpShard;
  o->tp = layout->tp;
  o->ep = layout->ep;
  o->sequenceParallel = layout->sequenceParallel;
  o->cp = layout->cp;
  o->cpHeadTail = layout->cpHeadTail;
  if (layout->tp > 1)
    o->tpPlan = qwen3TensorParallelPlan(model);
  o->reshardAfterForward = layout->reshardAfterForward;
  return o;
}

double learningRateAt(const KilnPipelineOptions &o, int64_t step) {
  return o.lr * lrFactor(step, LrPhases{o.warmupSteps, o.stableSteps, o.decaySteps}, o.decayType,
                         o.minLrFactor);
}

void runKilnPipeline(mlir::ModuleOp module, const KilnPipelineOptions &options, LoweringStage to,
                     LoweringStage from, const std::string &what) {
  // The override rules name kernels: their specs must be registered first.
  if (options.hasKernelRules())
    registerCustomKernels();
  mlir::PassManager pm(module.getContext());
  buildKilnPipeline(pm, options, to, from);
  std::optional<mlir::TimingScope> passes;
  if (options.timing) {
    passes = options.timing->nest("passes");
    pm.enableTiming(*passes);
  }
  succeedOrFail(*module.getContext(), what, [&] { return pm.run(module); });
}

} // namespace kiln
