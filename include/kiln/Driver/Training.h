//===- Training.h - Capture and run whole training steps --------*- C++ -*-===//
//
// The training path end to end: capture @loss, differentiate it
// (kiln-autodiff) and add the optimizer (kiln-optimizer) to get
// @train_step(params..., step, exp_avg..., exp_avg_sq..., tokens)
//   -> (params..., step, exp_avg..., exp_avg_sq..., loss, grad_norm),
// then run it on the CPU executor step after step.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_TRAINING_H
#define KILN_DRIVER_TRAINING_H

#include "kiln/Driver/TrainConfig.h"
#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Driver/ModelFlops.h"
#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/PipelineConfig.h"
#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Frontend/Capture.h"
#include "kiln/Frontend/Qwen3Naming.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Runtime/TokenBatch.h"

#include "mlir/IR/MLIRContext.h"

#include <map>

namespace kiln {

struct CompiledStep;
class PipelineTraining;

/// The layout of `config`'s run on `launchedWorld` ranks, with the shape a
/// fixed token file gives the run where it leaves it unset (`config`
/// updated): the sequence length from its columns, the per-data-parallel-rank
/// batch from its rows. Throws kiln::Error naming the option or the file.
ParallelLayout resolveRunLayout(TrainConfig &config, const Qwen3Config &model,
                                int64_t launchedWorld);

/// Captures @loss for `shape` and runs the Kiln pipeline on it up to `stage`
/// (PerRank: + @loss_grad and the per-rank @train_step; Forward: the @loss
/// with its kernels substituted). Throws kiln::Error with the diagnostics if
/// a pass fails.
mlir::OwningOpRef<mlir::ModuleOp> captureTrainingStep(mlir::MLIRContext &context,
                                                      const Qwen3Config &model,
                                                      const CaptureOptions &shape,
                                                      const KilnPipelineOptions &options,
                                                      LoweringStage stage = LoweringStage::PerRank);

/// The per-rank program of `module`'s forward-only @loss under `layout`
/// (kiln-shard and kiln-partition on a copy, in a module of its own): its
/// parameters are stored as @train_step stores them, so validation runs on
/// each rank's slices and data-parallel rows.
mlir::OwningOpRef<mlir::ModuleOp> partitionLoss(mlir::ModuleOp module,
                                                const KilnPipelineOptions &options);

/// Random initial weights by HF key: normal(0, 0.02) for linear and embedding
/// weights, ones for norm weights. Each tensor's stream is seeded from `seed`
/// and its key, so the result does not depend on order.
TensorMap initialParameters(const Qwen3Config &model, uint64_t seed);
/// One tensor of initialParameters, drawn alone (each key has its own stream).
Tensor initialParameter(const Qwen3Parameter &parameter, uint64_t seed);

/// Throws kiln::Error naming `file` and the tensor unless it holds exactly
/// the optimizer state `expected` (whole shapes by state name), each F32,
/// and `step` is >= 0: a checkpoint's optimizer state, checked before any of
/// it is restored.
void checkOptimizerStateFile(const SafeTensorsFile &file, int64_t step,
                             const std::map<std::string, Shape> &expected);

struct StepMetrics {
  int64_t step = 0; ///< 1-based; step 1's loss is at the initial weights
  double loss = 0, gradNorm = 0, lr = 0;
  /// Metric outputs of the step by name (a MoE model's "aux_loss").
  std::vector<std::pair<std::string, double>> metrics;
  double seconds = 0, tokensPerSecond = 0, tflops = 0, mfu = 0;
  /// The executor's live-tensor peak during the step; -1 in compiled mode,
  /// which does not count them.
  int64_t memLivePeakBytes = 0;
  double collectiveSeconds = 0; ///< this rank's time in collectives
  /// Bytes this rank sent in the step's collectives, by grid axes.
  std::map<std::string, int64_t> bytesSent;
  int64_t rssPeakBytes = 0;     ///< process high-water mark so far
  /// Seconds of each op of @train_step, when the Trainer times ops.
  std::map<mlir::Operation *, double> opSeconds;
};

/// Trains one model on one fixed token batch per step.
class Trainer {
public:
  /// Resolves the model, captures the step, and loads the initial weights:
  /// from `resumeDir` (the model of a full checkpoint; then
  /// restoreOptimizerState follows), else checkpoint.initial_load_path, else
  /// drawn (training.seed).
  explicit Trainer(const TrainConfig &config, const std::string &resumeDir = "");
  ~Trainer();
  /// The run's configuration, with what the Trainer filled in (the batch and
  /// sequence length a token file implies).
  const TrainConfig &config() const { return config_; }

  /// One optimizer update on `tokens` [local_batch_size, seq_len + 1]. If a
  /// kernel rejects the batch (e.g. an out-of-range token id) before any
  /// weight was updated, the state is kept and the Trainer stays usable;
  /// otherwise every later call fails with an error naming the lost step.
  StepMetrics step(const Tensor &tokens);
  /// With compile.enable, step() runs @train_step lowered to HLO and
  /// compiled for the CPU (docs/compiled.md); the weights, optimizer state,
  /// evaluation and checkpoints are the eager Trainer's. The compile's
  /// seconds: lowering to LLVM, and LLVM's own (0, 0 when eager).
  bool compiled() const { return compiled_ != nullptr; }
  std::pair<double, double> compileSeconds() const;
  /// compile.enable's step (null when eager): its arena's figures.
  const CompiledStep *compiledStep() const { return compiled_.get(); }
  /// Makes step() time every op of @train_step (StepMetrics::opSeconds).
  void timeOps(bool on) { timeOps_ = on; }
  /// Mean loss of `tokens` at the current weights.
  double evaluate(const Tensor &tokens);
  /// Mean of the losses of `batches`; under a layout, each rank runs the
  /// per-rank @loss on its slices and rows (nothing is gathered).
  double evaluate(const std::vector<Tensor> &batches);
  /// Unclipped gradients of the loss of `tokens` at the current weights, by
  /// HF key.
  TensorMap gradients(const Tensor &tokens);

  /// Current weights by HF key (tied models have no lm_head.weight; a MoE
  /// layer's experts one tensor each), whole: on several ranks every rank
  /// must call it (it gathers the shards).
  TensorMap parameters() const;
  /// The optimizer state by state name (each parameter's AdamW moments under
  /// expAvgName/expAvgSqName of its key, experts stacked; a MoE router's
  /// expert bias), whole: every rank must call it (it gathers the shards).
  TensorMap optimizerState() const;
  /// Replaces the optimizer state with `file`'s whole tensors (as
  /// optimizerState returns them; each rank keeps its slice) and the update
  /// count with `step`. Throws kiln::Error naming the file and the tensor if
  /// one is missing, unexpected, or of another shape or dtype.
  void restoreOptimizerState(const SafeTensorsFile &file, int64_t step);

  const ParallelLayout &layout() const { return layout_; }
  /// Rows of the token batches `step` takes: local_batch_size per
  /// data-parallel rank and microbatch (training.global_batch_size).
  int64_t globalBatchSize() const;
  /// Microbatches a step accumulates gradients over, and the rows of each
  /// (local_batch_size x the data-parallel degree: the captured batch).
  int64_t microbatches() const;
  int64_t microbatchSize() const;
  /// The memory plan of the whole (unpartitioned) step on one rank, for
  /// comparison with the per-rank plan.
  MemoryPlan singleRankPlan() const;
  /// Rank 0, which prints and writes files.
  bool isLeader() const { return execution_.rank == 0; }
  /// True if `value` is true on any rank (every rank must call it).
  bool anyRank(bool value) const;

  const Qwen3Config &model() const { return model_; }
  int64_t updatesDone() const { return updates_; }
  /// torchtitanFlopsPerToken of the model at the run's sequence length.
  double flopsPerToken() const;
  /// Peak FLOP/s used for MFU: this machine's measured sgemm rate
  /// (measureCpuPeakFlops), since a CPU has no published bf16 peak to use.
  /// Measured at the first call, not at construction, so that a run checks
  /// its inputs before it spends seconds probing; under MPI every rank calls
  /// it at the same point (step() does), as the ranks share the figures.
  double peakFlops();
  /// The captured step (under pipeline parallelism: the stage functions and
  /// this rank's update).
  mlir::ModuleOp module();

private:
  /// pipeline_parallel_degree > 1: the rest of the constructor, for a
  /// PipelineTraining (refuses the options it does not run with yet).
  void startPipelined(const std::string &resumeDir);
  StepMetrics pipelinedStep(const Tensor &tokens);
  /// The step's time, rates, bytes sent since `sentBefore` and memory.
  void finishMetrics(StepMetrics &m, const Tensor &tokens, double seconds,
                     const std::map<std::string, int64_t> &sentBefore);
  /// This machine's sgemm rate (and its memory bandwidth for the cpu target's
  /// plan), measured once per machine.
  double measureMachine();
  void checkTokens(const Tensor &tokens) const;
  /// compile.enable: @train_step through the pipeline to HLO (on a copy of
  /// the module), then to native code.
  void compileStep();
  /// The compiled step on @train_step's arguments `args` (their dtypes
  /// converted where the HLO narrowed them to int32), with the rank last;
  /// returns @train_step's results in its dtypes. The state it updates in
  /// place is taken from `args` (left empty there), as runFunction consumes
  /// what it donates.
  std::vector<Tensor> runCompiled(std::vector<Tensor> &args) const;
  /// The whole weights by parameter key (experts stacked), gathered.
  TensorMap parameterState() const;
  void checkState() const;
  /// Records that the step's update failed (`why`) after overwriting the
  /// state in place: every later use of the state fails with it.
  void markStateLost(const std::string &why);
  /// @loss partitioned for this rank (partitionLoss), built on first use;
  /// null on one rank.
  mlir::func::FuncOp rankLoss();
  /// This rank's slice of a whole value of @train_step argument `arg`, and
  /// the whole value from this rank's slice (gathered from every rank).
  Tensor localSlice(Tensor full, unsigned arg) const;
  /// This rank's part of data input `arg` (a whole batch's [rows, seq]): its
  /// sequence laid out for context parallelism, then sliced.
  Tensor localInput(Tensor full, unsigned arg) const;
  Tensor gathered(Tensor local, unsigned arg) const;
  /// Calls `fn(name, arg)` for each optimizer-state argument of @train_step.
  template <typename Fn> void forEachOptimizerState(Fn fn) const;
  /// Fills the input slots of `args`, each from its microbatch's rows.
  static void bindInputs(llvm::ArrayRef<Signature::Slot> inputs,
                         llvm::ArrayRef<InputsAndLabels> microbatches, std::vector<Tensor> &args);
  /// A step's token batch [global batch, s+1], checked, as its microbatches.
  std::vector<InputsAndLabels> microbatchesOf(const Tensor &tokens) const;
  /// Arguments of @loss or @loss_grad: the whole weights `params` and one
  /// microbatch.
  std::vector<Tensor> argumentsOf(mlir::func::FuncOp fn, const TensorMap &params,
                                  const InputsAndLabels &microbatch) const;

  TrainConfig config_;
  Qwen3Config model_;
  std::unique_ptr<KilnPipelineOptions> pipeline_;
  ParallelLayout layout_;
  std::unique_ptr<DeviceGrid> grid_;
  ExecutionContext execution_;
  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp loss_, lossGrad_, trainStep_;
  /// The module and function rankLoss() built.
  mlir::OwningOpRef<mlir::ModuleOp> rankLossModule_;
  mlir::func::FuncOp rankLoss_;
  TrainStepSignature signature_;
  std::vector<Tensor> state_;  ///< by @train_step argument; inputs empty
  std::string lostState_;      ///< why the state is gone, after a failed update
  std::map<unsigned, Shape> globalShapes_; ///< whole shape of each state argument
  /// How each @train_step argument is split (none: whole on every rank).
  std::vector<std::optional<Sharding>> argShardings_;
  std::unique_ptr<CompiledStep> compiled_; ///< compile.enable's step; null: eager
  /// The run under pipeline parallelism (then module_ and the @train_step
  /// state stay empty); null otherwise.
  std::unique_ptr<PipelineTraining> pipelined_;
  std::vector<DType> resultDTypes_;         ///< @train_step's, for the compiled step
  int64_t updates_ = 0;
  double peakFlops_ = 0;
  bool timeOps_ = false;
};

} // namespace kiln

#endif // KILN_DRIVER_TRAINING_H
