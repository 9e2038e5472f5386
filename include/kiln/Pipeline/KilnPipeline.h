//===- KilnPipeline.h - The compile, as one pass pipeline -------*- C++ -*-===//
//
// Every tool and test assembles the compile here: one options struct (the
// run config fills it in one place, lib/Driver/PipelineConfig.cpp; kiln-opt
// takes it as pipeline options) and one builder that adds the passes from
// one stage of the program to a later one.
//
//   Captured  the frontend's module: @loss (and @forward)
//   Forward   @loss through the all-to-all dispatcher and the override rules
//             (what `kiln capture` prints)
//   PerRank   + @loss_grad and the per-rank @train_step (kiln dialect)
//   Hlo      the per-rank @train_step in the hlo dialect, for the exporter
//   Linalg   compiled mode: that @train_step in linalg on tensors
//   Llvm     compiled mode: in the LLVM dialect, for the JIT (Backend/Compiled)
//
// From Hlo on, the module must hold the hlo @train_step alone (bufferization
// runs over the whole module): kiln compile's model.hlo.mlir.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PIPELINE_KILNPIPELINE_H
#define KILN_PIPELINE_KILNPIPELINE_H

#include "kiln/Config/OverrideRules.h"
#include "kiln/Support/ClosedSetOption.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Support/Timing.h"

#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace kiln {

/// Where a program stands on the way from capture to native code (not a
/// pipeline-parallel stage: those are PipelineStages, Config/).
enum class LoweringStage { Captured, Forward, PerRank, Hlo, Linalg, Llvm };

/// The options of every pass of the pipeline, named as the run config names
/// them. Defaults: torchtitan's, one rank, float32, no kernels.
struct KilnPipelineOptions : public mlir::PassPipelineOptions<KilnPipelineOptions> {
  /// The most ranks a layout may have, and any one degree: past every
  /// cluster, and small enough that the degrees' products fit in 128 bits.
  static constexpr int64_t kMaxRanks = int64_t(1) << 24;

  // kiln-expert-dispatch (groups: ep, chunks: the data-parallel degree).
  Option<ExpertDispatcher> expertDispatch{
      *this, "expert-dispatch", llvm::cl::init(ExpertDispatcher::AllGather),
      llvm::cl::desc("parallelism.expert_dispatch: all_gather or all_to_all (the dispatcher)")};
  Option<double> capacityFactor{*this, "capacity-factor", llvm::cl::init(0.0),
                                llvm::cl::desc("parallelism.expert_capacity_factor")};

  // kiln-substitute-kernels.
  ListOption<std::string> ruleFiles{*this, "rules",
                                    llvm::cl::desc("override rule files (JSON)")};
  /// Rules given as data (the run config's), in addition to `rules`.
  std::vector<OverrideRule> inlineRules;
  /// Where the capture and each pass report their time (kiln plan
  /// --timing); none when null.
  mlir::TimingScope *timing = nullptr;
  Option<TargetName> target{*this, "target", llvm::cl::init(TargetName::Trn2),
                            llvm::cl::desc("target.name: trn2, trn1 or cpu")};
  Option<int64_t> lnc{*this, "lnc", llvm::cl::init(2), llvm::cl::desc("target.lnc")};
  Option<bool> log{*this, "log", llvm::cl::init(true),
                   llvm::cl::desc("print the [Override] lines (off on all ranks but one)")};

  // kiln-mixed-precision.
  Option<PrecisionDtype> paramDtype{
      *this, "param-dtype", llvm::cl::init(PrecisionDtype::Float32),
      llvm::cl::desc("training.mixed_precision_param: bfloat16 or float32")};
  Option<PrecisionDtype> reduceDtype{*this, "reduce-dtype", llvm::cl::init(PrecisionDtype::Float32),
                                     llvm::cl::desc("training.mixed_precision_reduce: float32")};

  // kiln-activation-checkpoint.
  Option<CheckpointMode> checkpointMode{
      *this, "ac-mode", llvm::cl::init(CheckpointMode::None),
      llvm::cl::desc("activation_checkpoint.mode: none, selective or full")};
  Option<std::string> selectiveAcOption{
      *this, "selective-ac-option", llvm::cl::init("2"),
      llvm::cl::desc("activation_checkpoint.selective_ac_option: op or N")};

  // kiln-optimizer.
  Option<double> lr{*this, "lr", llvm::cl::init(8e-4), llvm::cl::desc("optimizer.lr")};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9), llvm::cl::desc("optimizer.betas[0]")};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.95),
                       llvm::cl::desc("optimizer.betas[1]")};
  Option<double> eps{*this, "eps", llvm::cl::init(1e-8), llvm::cl::desc("optimizer.eps")};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.1),
                             llvm::cl::desc("optimizer.weight_decay")};
  Option<double> maxNorm{*this, "max-norm", llvm::cl::init(1.0),
                         llvm::cl::desc("training.max_norm")};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::init(0),
                              llvm::cl::desc("linear warmup updates")};
  Option<int64_t> stableSteps{*this, "stable-steps", llvm::cl::init(1000000000),
                              llvm::cl::desc("constant-rate updates after warmup")};
  Option<int64_t> decaySteps{*this, "decay-steps", llvm::cl::init(0),
                             llvm::cl::desc("decay updates after stable")};
  Option<DecayType> decayType{*this, "decay-type", llvm::cl::init(DecayType::Linear),
                              llvm::cl::desc("lr_scheduler.decay_type: linear, sqrt or cosine")};
  Option<double> minLrFactor{*this, "min-lr-factor", llvm::cl::init(0.0),
                             llvm::cl::desc("lr_scheduler.min_lr_factor")};
  Option<double> loadBalanceCoeff{*this, "load-balance-coeff", llvm::cl::init(0.0),
                                  llvm::cl::desc("the model's expert-bias step (0: off)")};
  Option<int64_t> microbatches{
      *this, "microbatches", llvm::cl::init(1),
      llvm::cl::desc("microbatches one update accumulates (training.global_batch_size)")};

  // kiln-lower-to-hlo.
  Option<bool> cpuKernelCalls{
      *this, "cpu-kernel-calls", llvm::cl::init(false),
      llvm::cl::desc("compiled mode: CPU-only kernels become KilnCpuKernel custom calls")};
  // The Llvm stage.
  Option<bool> hostAllocator{
      *this, "host-allocator", llvm::cl::init(false),
      llvm::cl::desc("compiled mode: buffers come from the host's step arena "
                     "(_mlir_memref_to_llvm_alloc/free) instead of malloc")};
  Option<int64_t> parallelLoopWork{
      *this, "parallel-loop-work", llvm::cl::init(0),
      llvm::cl::desc("compiled mode: parallel loop nests of at least this many innermost "
                     "iterations run on the host's threads (kiln_parallel_for; 0: never)")};
  // kiln-shard and kiln-partition (only with more than one rank).
  Option<int64_t> dpReplicate{*this, "dp-replicate", llvm::cl::init(1),
                              llvm::cl::desc("data_parallel_replicate_degree")};
  Option<int64_t> dpShard{*this, "dp-shard", llvm::cl::init(1),
                          llvm::cl::desc("data_parallel_shard_degree (resolved)")};
  Option<int64_t> tp{*this, "tp", llvm::cl::init(1), llvm::cl::desc("tensor_parallel_degree")};
  Option<int64_t> ep{*this, "ep", llvm::cl::init(1), llvm::cl::desc("expert_parallel_degree")};
  Option<bool> sequenceParallel{*this, "sequence-parallel", llvm::cl::init(false),
                                llvm::cl::desc("enable_sequence_parallel")};
  Option<int64_t> cp{*this, "cp", llvm::cl::init(1), llvm::cl::desc("context_parallel_degree")};
  Option<bool> cpHeadTail{*this, "cp-head-tail", llvm::cl::init(true),
                          llvm::cl::desc("context_parallel_load_balancer = headtail")};
  ListOption<std::string> tpPlan{*this, "tp-plan",
                                 llvm::cl::desc("tensor-parallel styles by module glob")};
  Option<ReshardAfterForward> reshardAfterForward{
      *this, "reshard-after-forward", llvm::cl::init(ReshardAfterForward::Default),
      llvm::cl::desc("fsdp_reshard_after_forward: default, always or never")};

  /// The first option whose value no pass accepts, described ("lr=inf: must
  /// be a finite number > 0"), or "" when all are valid: a non-finite number
  /// reached the optimizer, degrees whose product wrapped divided by zero. (A
  /// word outside a closed set does not parse.)
  std::string invalidOption() const;

  int64_t dataParallelDegree() const { return dpReplicate * dpShard; }
  int64_t worldSize() const { return dataParallelDegree() * cp * tp; }
  bool hasKernelRules() const { return !inlineRules.empty() || !ruleFiles.empty(); }
};

/// Adds to `pm` (on the module) the passes that take a program at stage
/// `from` to stage `to`, in this order, each only where `options` call for
/// it: kiln-expert-dispatch, kiln-substitute-kernels (after the dispatcher,
/// so an experts rule replaces the experts over its buffer) (Forward);
/// kiln-mixed-precision, kiln-autodiff, kiln-activation-checkpoint, kiln-optimizer,
/// kiln-shard and kiln-partition (PerRank); kiln-lower-to-hlo,
/// kiln-hlo-sink-converts (bf16), kiln-hlo-narrow-int64 and cse (Hlo);
/// kiln-convert-hlo-to-linalg, kiln-fuse-elementwise (Linalg); bufferization and
/// the LLVM lowering (Llvm).
/// Kernel rules need the kernels registered first (registerCustomKernels();
/// the driver's runKilnPipeline and kiln-opt do it), so this library does
/// not link the kernels' CPU implementations.
void buildKilnPipeline(mlir::OpPassManager &pm, const KilnPipelineOptions &options,
                       LoweringStage to, LoweringStage from = LoweringStage::Captured);

/// The bufferization models of the upstream dialects the Llvm stage
/// bufferizes; a context that runs that stage needs them.
void registerCompiledModeInterfaces(mlir::DialectRegistry &registry);

/// kiln-shard and kiln-partition of function `funcName` under the layout of
/// `options` (nothing on one rank): buildKilnPipeline's per-rank step, and
/// the driver's per-rank @loss for validation.
void buildPartitionPipeline(mlir::OpPassManager &pm, const KilnPipelineOptions &options,
                            llvm::StringRef funcName);

/// Pipeline parallelism's stage functions from a Forward-stage @loss: its
/// mixed-precision casts (as the PerRank step's), kiln-pipeline-split at
/// `stageStarts` (the first module of each stage after the first) and
/// kiln-autodiff of each stage into its forward and backward. With a layout
/// of several ranks in `options` (a pipeline rank's: FSDP inside a stage),
/// every stage is sharded and partitioned first on the grid [pp,
/// dp_replicate, dp_shard, tp] of `pipelineDegree` pipeline ranks.
void buildPipelineStagesPipeline(mlir::OpPassManager &pm, const KilnPipelineOptions &options,
                                 llvm::ArrayRef<std::string> stageStarts,
                                 int64_t pipelineDegree = 1);

/// Pipeline rank `pipelineRank`'s update (of `pipelineDegree`) after
/// buildPipelineStagesPipeline: kiln-optimizer with the run's AdamW,
/// clipping and schedule over the rank's stages' parameters, their
/// gradients summed over `microbatches` (every schedule run's of every
/// replica, not the options' accumulation) and over the pipeline's replicas
/// on grid axes `replicaAxes`.
void buildPipelineUpdatePipeline(mlir::OpPassManager &pm, const KilnPipelineOptions &options,
                                 int64_t microbatches, int64_t pipelineDegree, int64_t pipelineRank,
                                 llvm::ArrayRef<int64_t> replicaAxes = {});

/// The Hlo step for function `funcName` of a per-rank module (a pipeline
/// stage's forward or backward, or @train_step as buildKilnPipeline lowers
/// it): kiln-lower-to-hlo, kiln-hlo-sink-converts (bf16),
/// kiln-hlo-narrow-int64 and cse.
void buildHloLowering(mlir::OpPassManager &pm, const KilnPipelineOptions &options,
                      llvm::StringRef funcName);

/// Registers every Kiln pass and the pipelines kiln-opt offers, each taking
/// KilnPipelineOptions: `kiln-training` (Captured to PerRank), `kiln-to-hlo`
/// (Captured to Hlo), `kiln-per-rank-to-hlo` (PerRank to Hlo), and compiled mode's
/// `kiln-hlo-to-linalg` (Hlo to Linalg) and `kiln-hlo-to-llvm` (Hlo to Llvm).
void registerKilnPassesAndPipelines();

} // namespace kiln

#endif // KILN_PIPELINE_KILNPIPELINE_H
