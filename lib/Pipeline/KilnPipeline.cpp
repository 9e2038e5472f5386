//===- KilnPipeline.cpp - The compile, as one pass pipeline ---------------===//

#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Passes/KilnToHlo/Passes.h"
#include "kiln/Passes/Hlo/Passes.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace kiln {

void buildPartitionPipeline(OpPassManager &pm, const KilnPipelineOptions &o, StringRef funcName) {
  if (o.worldSize() == 1)
    return;
  ShardOptions shard;
  shard.funcName = funcName.str();
  shard.dpReplicate = o.dpReplicate;
  shard.dpShard = o.dpShard;
  shard.tp = o.tp;
  shard.ep = o.ep;
  shard.sequenceParallel = o.sequenceParallel;
  shard.tpPlan.assign(o.tpPlan.begin(), o.tpPlan.end());
  pm.addPass(createShard(shard));
  PartitionOptions partition;
  partition.funcName = funcName.str();
  partition.reshardAfterForward = o.reshardAfterForward;
  pm.addPass(createPartition(partition));
}

namespace {
/// The captured @loss -> the @loss Kiln differentiates.
void buildForwardPipeline(OpPassManager &pm, const KilnPipelineOptions &o) {
  if (o.expertDispatch == "all_to_all") {
    ExpertDispatchOptions dispatch;
    dispatch.groups = o.ep;
    dispatch.chunks = o.dataParallelDegree();
    dispatch.capacityFactor = o.capacityFactor;
    pm.addPass(createExpertDispatch(dispatch));
  }
  if (o.hasKernelRules()) {
    SubstituteKernelsOptions substitute;
    substitute.ruleFiles.assign(o.ruleFiles.begin(), o.ruleFiles.end());
    substitute.targetName = o.target;
    substitute.lnc = o.lnc;
    substitute.log = o.log;
    pm.addPass(createSubstituteKernels(o.inlineRules, substitute));
  }
}

/// @loss -> the per-rank @train_step.
void buildPerRankPipeline(OpPassManager &pm, const KilnPipelineOptions &o) {
  if (o.paramDtype != "float32") {
    MixedPrecisionOptions precision;
    precision.param = o.paramDtype;
    precision.reduce = o.reduceDtype;
    pm.addPass(createMixedPrecision(precision));
  }
  pm.addPass(createAutodiff());
  if (o.checkpointMode != "none") {
    ActivationCheckpointOptions checkpoint;
    checkpoint.mode = o.checkpointMode;
    checkpoint.selectiveOption = o.selectiveAcOption;
    pm.addPass(createActivationCheckpoint(checkpoint));
  }
  OptimizerOptions optimizer;
  optimizer.lr = o.lr;
  optimizer.beta1 = o.beta1;
  optimizer.beta2 = o.beta2;
  optimizer.eps = o.eps;
  optimizer.weightDecay = o.weightDecay;
  optimizer.maxNorm = o.maxNorm;
  optimizer.warmupSteps = o.warmupSteps;
  optimizer.stableSteps = o.stableSteps;
  optimizer.decaySteps = o.decaySteps;
  optimizer.decayType = o.decayType;
  optimizer.minLrFactor = o.minLrFactor;
  optimizer.loadBalanceCoeff = o.loadBalanceCoeff;
  pm.addPass(createOptimizer(optimizer));
  buildPartitionPipeline(pm, o, "train_step");
}

/// The per-rank @train_step -> the hlo module.
void buildHloPipeline(OpPassManager &pm, const KilnPipelineOptions &o) {
  pm.addPass(createLowerToHlo());
  if (o.paramDtype != "float32")
    pm.addPass(createHloSinkConverts());
  pm.addPass(createHloNarrowInt64());
  // Identical instructions (a parameter's two converts, shared iotas) once.
  pm.addPass(createCSEPass());
}
} // namespace

void buildKilnPipeline(OpPassManager &pm, const KilnPipelineOptions &options, PipelineStage to,
                       PipelineStage from) {
  using Builder = void (*)(OpPassManager &, const KilnPipelineOptions &);
  // Step i takes a program from stage i to stage i + 1.
  static constexpr Builder steps[] = {buildForwardPipeline, buildPerRankPipeline,
                                      buildHloPipeline};
  for (int stage = int(from); stage < int(to); ++stage)
    steps[stage](pm, options);
}

void registerKilnPassesAndPipelines() {
  registerKilnTransformsPasses();
  registerKilnToHloPasses();
  registerHloTransformsPasses();
  struct Registration {
    const char *name, *description;
    PipelineStage from, to;
  };
  for (const Registration &r :
       {Registration{"kiln-training",
                     "@loss to the per-rank @train_step: kiln-expert-dispatch ... kiln-partition, "
                     "as the options (named after the run config) call for them",
                     PipelineStage::Captured, PipelineStage::PerRank},
        Registration{"kiln-to-hlo", "@loss to the hlo module kiln compile exports",
                     PipelineStage::Captured, PipelineStage::Hlo},
        Registration{"kiln-per-rank-to-hlo",
                     "A per-rank @train_step to the hlo module: kiln-lower-to-hlo, "
                     "kiln-hlo-sink-converts (bf16), kiln-hlo-narrow-int64, cse",
                     PipelineStage::PerRank, PipelineStage::Hlo}})
    PassPipelineRegistration<KilnPipelineOptions>(
        r.name, r.description, [r](OpPassManager &pm, const KilnPipelineOptions &options) {
          buildKilnPipeline(pm, options, r.to, r.from);
        });
}

} // namespace kiln
