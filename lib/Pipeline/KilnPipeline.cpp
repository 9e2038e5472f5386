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

#include <fmt/core.h>

#include <cmath>
#include <limits>
#include <mutex>

#include <algorithm>

using namespace mlir;

namespace kiln {

namespace {
/// kiln-shard and kiln-partition of `funcName`, or with `pipelineDegree` of
/// every pipeline stage on a grid led by pp.
void addPartition(OpPassManager &pm, const KilnPipelineOptions &o, StringRef funcName,
                  int64_t pipelineDegree) {
  bool stages = pipelineDegree > 0;
  ShardOptions shard;
  shard.funcName = funcName.str();
  shard.stages = stages;
  shard.pp = std::max<int64_t>(1, pipelineDegree);
  shard.dpReplicate = o.dpReplicate;
  shard.dpShard = o.dpShard;
  shard.tp = o.tp;
  shard.ep = o.ep;
  shard.sequenceParallel = o.sequenceParallel;
  shard.cp = o.cp;
  shard.cpHeadTail = o.cpHeadTail;
  shard.tpPlan.assign(o.tpPlan.begin(), o.tpPlan.end());
  pm.addPass(createShard(shard));
  PartitionOptions partition;
  partition.funcName = funcName.str();
  partition.stages = stages;
  partition.reshardAfterForward = o.reshardAfterForward;
  pm.addPass(createPartition(partition));
}
} // namespace

void buildPartitionPipeline(OpPassManager &pm, const KilnPipelineOptions &o, StringRef funcName) {
  if (o.worldSize() > 1)
    addPartition(pm, o, funcName, 0);
}

namespace {
/// The captured @loss -> the @loss Kiln differentiates.
void buildForwardPipeline(OpPassManager &pm, const KilnPipelineOptions &o) {
  if (o.expertDispatch == ExpertDispatcher::AllToAll) {
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

/// kiln-mixed-precision where the options cast (bf16 parameters).
void addMixedPrecision(OpPassManager &pm, const KilnPipelineOptions &o) {
  if (o.paramDtype == PrecisionDtype::Float32)
    return;
  MixedPrecisionOptions precision;
  precision.param = o.paramDtype;
  precision.reduce = o.reduceDtype;
  pm.addPass(createMixedPrecision(precision));
}

/// kiln-activation-checkpoint's options: the run's mode, on @loss_grad or
/// on every differentiated pipeline stage.
ActivationCheckpointOptions checkpointOptions(const KilnPipelineOptions &o, bool pipelineStages) {
  ActivationCheckpointOptions checkpoint;
  checkpoint.mode = o.checkpointMode;
  checkpoint.selectiveOption = o.selectiveAcOption;
  checkpoint.pipelineStages = pipelineStages;
  return checkpoint;
}

/// kiln-optimizer's options: the run's AdamW, clipping, schedule, load
/// balancing and microbatches.
OptimizerOptions optimizerOptions(const KilnPipelineOptions &o) {
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
  optimizer.microbatches = o.microbatches;
  return optimizer;
}

/// @loss -> the per-rank @train_step.
void buildPerRankPipeline(OpPassManager &pm, const KilnPipelineOptions &o) {
  addMixedPrecision(pm, o);
  pm.addPass(createAutodiff());
  if (o.checkpointMode != CheckpointMode::None)
    pm.addPass(createActivationCheckpoint(checkpointOptions(o, false)));
  pm.addPass(createOptimizer(optimizerOptions(o)));
  buildPartitionPipeline(pm, o, "train_step");
}

/// The per-rank @train_step -> the hlo module.
void buildHloPipeline(OpPassManager &pm, const KilnPipelineOptions &o) {
  buildHloLowering(pm, o, "train_step");
}

/// The hlo @train_step -> linalg on tensors (compiled mode).
void buildLinalgPipeline(OpPassManager &pm, const KilnPipelineOptions &) {
  pm.addPass(createConvertHloToLinalg());
  // A chain of elementwise ops (and broadcasts) becomes one loop nest that
  // writes one buffer, reductions take their producers, and cheap producers
  // are recomputed by each consumer: 1337 linalg.generic -> 308 on the
  // fixture's step.
  pm.addPass(createFuseElementwise());
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
/// the temporaries moved to their last uses, loops (scf.parallel where the
/// iterators are), each loop nest a function of its own (a large parallel
/// one run on the host's threads, with parallel-loop-work), then LLVM
/// (docs/compiled.md).
void buildLlvmPipeline(OpPassManager &pm, const KilnPipelineOptions &o) {
  registerUpstreamLoweringPasses();
  // The inner pass list: parsePassPipeline nests a builtin.module(...) text
  // under pm's own module anchor, where it would lower nothing. With the
  // host allocator, allocations call _mlir_memref_to_llvm_alloc and free,
  // which compiled mode binds to the step's arena (StepArena.h).
  static constexpr const char *kBufferize =
      "one-shot-bufferize{bufferize-function-boundaries "
      "function-boundary-type-conversion=identity-layout-map},"
      "buffer-results-to-out-params{hoist-static-allocs modify-public-functions},"
      "buffer-deallocation-pipeline";
  std::string lower = std::string("convert-scf-to-cf,"
                                  "expand-strided-metadata,lower-affine,finalize-memref-to-llvm") +
                      (o.hostAllocator ? "{use-generic-functions}" : "") +
                      ",convert-math-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,"
                      "convert-func-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts";
  if (failed(parsePassPipeline(kBufferize, pm)))
    llvm::report_fatal_error("compiled mode's bufferization pipeline does not parse");
  pm.addNestedPass<func::FuncOp>(createCompactBuffers());
  if (failed(parsePassPipeline("convert-linalg-to-parallel-loops", pm)))
    llvm::report_fatal_error("compiled mode's loop lowering does not parse");
  OutlineLoopsOptions outline;
  outline.parallelWork = o.parallelLoopWork;
  pm.addPass(createOutlineLoops(outline));
  if (failed(parsePassPipeline(lower, pm)))
    llvm::report_fatal_error("compiled mode's lowering pipeline does not parse");
}

} // namespace

void buildHloLowering(OpPassManager &pm, const KilnPipelineOptions &o, StringRef funcName) {
  LowerToHloOptions lower;
  lower.funcName = funcName.str();
  lower.cpuKernels = o.cpuKernelCalls;
  pm.addPass(createLowerToHlo(lower));
  if (o.paramDtype != PrecisionDtype::Float32)
    pm.addPass(createHloSinkConverts());
  pm.addPass(createHloNarrowInt64());
  // Identical instructions (a parameter's two converts, shared iotas) once.
  pm.addPass(createCSEPass());
}

void buildPipelineStagesPipeline(OpPassManager &pm, const KilnPipelineOptions &options,
                                 llvm::ArrayRef<std::string> stageStarts, int64_t pipelineDegree) {
  addMixedPrecision(pm, options);
  PipelineSplitOptions split;
  split.stageStarts.assign(stageStarts.begin(), stageStarts.end());
  pm.addPass(createPipelineSplit(split));
  AutodiffOptions stages;
  stages.pipelineStages = true;
  pm.addPass(createAutodiff(stages));
  if (options.checkpointMode != CheckpointMode::None)
    pm.addPass(createActivationCheckpoint(checkpointOptions(options, true)));
  if (options.worldSize() > 1)
    addPartition(pm, options, "", std::max<int64_t>(1, pipelineDegree));
  pm.addPass(createStageForwardBackward());
}

void buildPipelineUpdatePipeline(OpPassManager &pm, const KilnPipelineOptions &options,
                                 int64_t microbatches, int64_t pipelineDegree, int64_t pipelineRank,
                                 llvm::ArrayRef<int64_t> replicaAxes) {
  OptimizerOptions update = optimizerOptions(options);
  update.microbatches = microbatches;
  update.pipelineDegree = pipelineDegree;
  update.pipelineRank = pipelineRank;
  update.dataParallelAxes.assign(replicaAxes.begin(), replicaAxes.end());
  pm.addPass(createOptimizer(update));
}

void registerCompiledModeInterfaces(DialectRegistry &registry) {
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(registry);
}

void buildKilnPipeline(OpPassManager &pm, const KilnPipelineOptions &options, LoweringStage to,
                       LoweringStage from) {
  using Builder = void (*)(OpPassManager &, const KilnPipelineOptions &);
  // Step i takes a program from stage i to stage i + 1.
  static constexpr Builder steps[] = {buildForwardPipeline, buildPerRankPipeline,
                                      buildHloPipeline, buildLinalgPipeline, buildLlvmPipeline};
  for (int stage = int(from); stage < int(to); ++stage)
    steps[stage](pm, options);
}

std::string KilnPipelineOptions::invalidOption() const {
  auto number = [](const char *name, double value, double low, bool lowOpen, double high,
                   bool highOpen) -> std::string {
    bool ok = std::isfinite(value) && (lowOpen ? value > low : value >= low) &&
              (highOpen ? value < high : value <= high);
    if (ok)
      return "";
    return fmt::format("{}={}: must be a finite number in {}{}, {}{}", name, value,
                       lowOpen ? "(" : "[", low, high, highOpen ? ")" : "]");
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (const std::string &problem :
       {number("capacity-factor", capacityFactor, 0, false, kInf, true),
        lnc == 1 || lnc == 2 ? "" : fmt::format("lnc={}: must be 1 or 2", int64_t(lnc)),
        std::string(reduceDtype == PrecisionDtype::Float32
                        ? ""
                        : "reduce-dtype=bfloat16: must be float32 (gradients reduce in float32)"),
        number("lr", lr, 0, true, kInf, true), number("beta1", beta1, 0, false, 1, true),
        number("beta2", beta2, 0, false, 1, true), number("eps", eps, 0, true, kInf, true),
        number("weight-decay", weightDecay, 0, false, kInf, true),
        number("max-norm", maxNorm, 0, true, kInf, true),
        number("min-lr-factor", minLrFactor, 0, false, 1, false),
        number("load-balance-coeff", loadBalanceCoeff, 0, false, kInf, true)})
    if (!problem.empty())
      return problem;
  if (microbatches < 1)
    return fmt::format("microbatches={}: must be >= 1", int64_t(microbatches));
  for (auto [name, steps] : {std::pair<const char *, int64_t>{"warmup-steps", warmupSteps},
                             {"stable-steps", stableSteps},
                             {"decay-steps", decaySteps}})
    if (steps < 0)
      return fmt::format("{}={}: must be >= 0", name, steps);
  // Each degree bounded, then their product in 128 bits: a wrapped 64-bit
  // product divided by zero in kiln-shard.
  for (auto [name, degree] : {std::pair<const char *, int64_t>{"dp-replicate", dpReplicate},
                              {"dp-shard", dpShard},
                              {"tp", tp},
                              {"ep", ep},
                              {"cp", cp}})
    if (degree < 1 || degree > kMaxRanks)
      return fmt::format("{}={}: must be in [1, {}] (2^24 ranks)", name, degree, kMaxRanks);
  __int128 world = __int128(dpReplicate) * dpShard * cp * tp;
  if (world > kMaxRanks)
    return fmt::format("dp-replicate x dp-shard x cp x tp = {} x {} x {} x {} = {:.0f}: more "
                       "than {} ranks (2^24)",
                       int64_t(dpReplicate), int64_t(dpShard), int64_t(cp), int64_t(tp),
                       double(world), kMaxRanks);
  return "";
}

void registerKilnPassesAndPipelines() {
  registerKilnTransformsPasses();
  registerKilnToHloPasses();
  registerHloTransformsPasses();
  registerHloToLinalgPasses();
  registerUpstreamLoweringPasses();
  struct Registration {
    const char *name, *description;
    LoweringStage from, to;
  };
  for (const Registration &r :
       {Registration{"kiln-training",
                     "@loss to the per-rank @train_step: kiln-expert-dispatch ... kiln-partition, "
                     "as the options (named after the run config) call for them",
                     LoweringStage::Captured, LoweringStage::PerRank},
        Registration{"kiln-to-hlo", "@loss to the hlo module kiln compile exports",
                     LoweringStage::Captured, LoweringStage::Hlo},
        Registration{"kiln-per-rank-to-hlo",
                     "A per-rank @train_step to the hlo module: kiln-lower-to-hlo, "
                     "kiln-hlo-sink-converts (bf16), kiln-hlo-narrow-int64, cse",
                     LoweringStage::PerRank, LoweringStage::Hlo},
        Registration{"kiln-hlo-to-linalg",
                     "An hlo module of one @train_step to fused linalg on tensors: "
                     "kiln-convert-hlo-to-linalg, kiln-fuse-elementwise",
                     LoweringStage::Hlo, LoweringStage::Linalg},
        Registration{"kiln-hlo-to-llvm",
                     "An hlo module of one @train_step to the LLVM dialect compiled mode JITs: "
                     "kiln-convert-hlo-to-linalg, one-shot-bufferize, ..., "
                     "reconcile-unrealized-casts",
                     LoweringStage::Hlo, LoweringStage::Llvm}})
    // PassPipelineRegistration's, with the options checked: a bad value is
    // the pipeline's parse error, naming the option.
    registerPassPipeline(
        r.name, r.description,
        [r](OpPassManager &pm, StringRef text,
            function_ref<LogicalResult(const Twine &)> errorHandler) {
          KilnPipelineOptions options;
          if (failed(options.parseFromString(text)))
            return failure();
          if (std::string problem = options.invalidOption(); !problem.empty())
            return errorHandler(Twine("--") + r.name + ": " + problem);
          buildKilnPipeline(pm, options, r.to, r.from);
          return success();
        },
        [](function_ref<void(const mlir::detail::PassOptions &)> handler) {
          handler(KilnPipelineOptions());
        });
}

} // namespace kiln
