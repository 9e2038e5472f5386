//===- KilnPipeline.cpp - The compile, as one pass pipeline ---------------===//

#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Passes/KilnToHlo/Passes.h"
#include "kiln/Passes/Hlo/Passes.h"
#include "kiln/Passes/HloToLinalg/Passes.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <mutex>

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
  LowerToHloOptions lower;
  lower.cpuKernels = o.cpuKernelCalls;
  pm.addPass(createLowerToHlo(lower));
  if (o.paramDtype != "float32")
    pm.addPass(createHloSinkConverts());
  pm.addPass(createHloNarrowInt64());
  // Identical instructions (a parameter's two converts, shared iotas) once.
  pm.addPass(createCSEPass());
}

/// The hlo @train_step -> linalg on tensors (compiled mode).
void buildLinalgPipeline(OpPassManager &pm, const KilnPipelineOptions &) {
  pm.addPass(createConvertHloToLinalg());
  // A chain of elementwise ops (and broadcasts) becomes one loop nest that
  // writes one buffer: 1250 linalg.generic -> 474 on the fixture's step.
  pm.addPass(createLinalgElementwiseOpFusionPass());
}

/// Upstream's passes compiled mode's lowering names, registered once.
void registerUpstreamLoweringPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    bufferization::registerBufferizationPasses();
    bufferization::registerBufferizationPipelines();
    registerLinalgPasses();
    memref::registerMemRefPasses();
    registerConversionPasses();
  });
}

/// Linalg on tensors -> the LLVM dialect: one-shot bufferization over the
/// function boundaries (identity layouts: the runner passes dense
/// row-major buffers), the results as caller-allocated out-parameters (the
/// step allocates none of its outputs), ownership-based deallocation of
/// the temporaries, loops, then LLVM (docs/compiled.md).
void buildLlvmPipeline(OpPassManager &pm, const KilnPipelineOptions &) {
  registerUpstreamLoweringPasses();
  // The inner pass list: parsePassPipeline nests a builtin.module(...) text
  // under pm's own module anchor, where it would lower nothing.
  static constexpr const char *kLowering =
      "one-shot-bufferize{bufferize-function-boundaries "
      "function-boundary-type-conversion=identity-layout-map},"
      "buffer-results-to-out-params{hoist-static-allocs modify-public-functions},"
      "buffer-deallocation-pipeline,convert-linalg-to-loops,convert-scf-to-cf,"
      "expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-math-to-llvm,"
      "convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,convert-index-to-llvm,"
      "reconcile-unrealized-casts";
  if (failed(parsePassPipeline(kLowering, pm)))
    llvm::report_fatal_error("compiled mode's lowering pipeline does not parse");
}
} // namespace

void registerCompiledModeInterfaces(DialectRegistry &registry) {
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(registry);
}

void buildKilnPipeline(OpPassManager &pm, const KilnPipelineOptions &options, PipelineStage to,
                       PipelineStage from) {
  using Builder = void (*)(OpPassManager &, const KilnPipelineOptions &);
  // Step i takes a program from stage i to stage i + 1.
  static constexpr Builder steps[] = {buildForwardPipeline, buildPerRankPipeline,
                                      buildHloPipeline, buildLinalgPipeline, buildLlvmPipeline};
  for (int stage = int(from); stage < int(to); ++stage)
    steps[stage](pm, options);
}

void registerKilnPassesAndPipelines() {
  registerKilnTransformsPasses();
  registerKilnToHloPasses();
  registerHloTransformsPasses();
  registerHloToLinalgPasses();
  registerUpstreamLoweringPasses();
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
                     PipelineStage::PerRank, PipelineStage::Hlo},
        Registration{"kiln-hlo-to-linalg",
                     "An hlo module of one @train_step to fused linalg on tensors: "
                     "kiln-convert-hlo-to-linalg, linalg-fuse-elementwise-ops",
                     PipelineStage::Hlo, PipelineStage::Linalg},
        Registration{"kiln-hlo-to-llvm",
                     "An hlo module of one @train_step to the LLVM dialect compiled mode JITs: "
                     "kiln-convert-hlo-to-linalg, one-shot-bufferize, ..., "
                     "reconcile-unrealized-casts",
                     PipelineStage::Hlo, PipelineStage::Llvm}})
    PassPipelineRegistration<KilnPipelineOptions>(
        r.name, r.description, [r](OpPassManager &pm, const KilnPipelineOptions &options) {
          buildKilnPipeline(pm, options, r.to, r.from);
        });
}

} // namespace kiln
