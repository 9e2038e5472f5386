//===- PipelineTraining.h - One pipeline rank's training steps ---*- C++ -*-===//
//
// A training step under pipeline parallelism, on one pipeline rank: the
// stage functions (PipelineStageFunctions.h) run as the schedule orders
// them (runPipelineSchedule), gradients summed over the microbatches and,
// for a parameter used on several ranks (a tied table), over those ranks;
// then the rank's update (kiln-optimizer pipeline-degree), whose gradient
// norm spans every stage. Each rank holds only its stages' parameters and
// their AdamW moments. With several ranks to a stage (FSDP, HSDP, TP, EP
// inside it) the stage functions are partitioned on the run's grid: each
// rank holds its shard of them, and the stages' collectives run among the
// ranks of one pipeline rank.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PIPELINETRAINING_H
#define KILN_DRIVER_PIPELINETRAINING_H

#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Config/PipelineSchedule.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Runtime/TokenBatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <functional>
#include <map>

namespace kiln {

struct KilnPipelineOptions;

class PipelineTraining {
public:
  /// A parameter's initial value by HF key: the whole parameter, of `type`,
  /// through `slice` (this rank's part of it).
  using ParameterSource = std::function<Tensor(const std::string &key, mlir::Type type,
                                               llvm::function_ref<Tensor(Tensor)> slice)>;

  /// Captures `model`'s stage functions for `layout` (its pipeline stages,
  /// schedule and microbatch size; `localBatch` rows of `seq` tokens a
  /// schedule run, `accumulation` runs a step, whose gradients one update
  /// sums) and this rank's update under `options`, and loads this rank's
  /// parameters from `initial`. The ranks are `grid`, whose axis `ppAxis`
  /// (its first) is the pipeline's; replicas of the whole pipeline along
  /// dp_replicate each train on their rows of every batch. With a layout
  /// of several ranks in `options` (the run's without pp) the stages are
  /// partitioned over every axis but pp instead, each data-parallel rank of
  /// a pipeline rank on its rows of every microbatch. Throws kiln::Error
  /// naming the axis when another than dp_replicate has several ranks and
  /// the stages are not partitioned.
  PipelineTraining(const Qwen3Config &model, const ParallelLayout &layout, int64_t localBatch,
                   int64_t accumulation, int64_t seq, const KilnPipelineOptions &options,
                   DeviceGrid &grid, int16_t ppAxis, const ParameterSource &initial);

  struct StepResult {
    double loss = 0;     ///< mean over the step's tokens, on every rank
    double gradNorm = 0; ///< over every stage, before clipping
  };
  /// One update on `tokens` [accumulation x replicas x localBatch, seq + 1],
  /// the schedule run on this replica's localBatch rows of each of the
  /// accumulation parts in turn; every rank of the grid calls it with the
  /// same tokens. The update takes the weights and moments in and
  /// overwrites them: if it fails after overwriting some, the state is gone
  /// (stateLost()); a failure before keeps it.
  StepResult step(const Tensor &tokens);
  /// Whether a failed step's update took the state with it.
  bool stateLost() const { return state_.empty(); }

  /// The mean loss of `batches` (each [accumulation x localBatch, seq + 1],
  /// the mean of its microbatches' losses) at the current weights: the
  /// schedule's forwards alone (forwardOnly), on every rank of the grid.
  double evaluate(const std::vector<Tensor> &batches);

  /// This rank's parameters by HF key (its stages' only).
  TensorMap parameters() const;
  /// This rank's optimizer state by state name (exp_avg.<key>, ...).
  TensorMap optimizerState() const;
  /// Every stage's parameters (`optimizer`: their AdamW moments instead)
  /// by name, whole, on every rank: each from the lowest pipeline rank
  /// holding it (every rank must call it).
  TensorMap gathered(bool optimizer) const;
  /// Every parameter's unclipped gradient of the mean loss of `tokens` at
  /// the current weights, by key, whole, on every rank.
  TensorMap gradients(const Tensor &tokens);
  /// Replaces this rank's moments with `file`'s (whole tensors, as
  /// gathered(true) returns them) and the update count with `step`. Throws
  /// kiln::Error naming the file and the tensor if one of the model's is
  /// missing, another's is there, or one has another shape or dtype.
  void restoreOptimizerState(const SafeTensorsFile &file, int64_t step);
  int64_t pipelineRank() const { return pipelineRank_; }
  const PipelineSchedule &schedule() const { return schedule_; }
  /// The module holding the stage functions and @train_step (the update).
  mlir::ModuleOp module() { return *module_; }

private:
  /// Runs the schedule (`forwards`: its forwards alone) on each
  /// schedule_.microbatches of `tokens`' microbatches in turn; returns the
  /// mean loss over them all (on every rank) and, with `grads`, sets this
  /// rank's gradients by key summed over them (and over the ranks sharing a
  /// parameter).
  double runSchedules(const Tensor &tokens, bool forwards, TensorMap *grads);
  /// `mine` (this rank's tensors by name: parameters, gradients, or with
  /// `optimizer` moments) whole on every rank, each from its lowest holder.
  TensorMap gatheredFrom(const TensorMap &mine, bool optimizer) const;
  /// Run `run`'s microbatches as the stage functions take them: this
  /// replica's (unpartitioned), or this rank's slice of each microbatch's
  /// rows over every data-parallel rank (partitioned), from `pieces`, the
  /// step's rows split into one piece per microbatch and row group.
  std::vector<InputsAndLabels> runMicrobatches(const std::vector<InputsAndLabels> &pieces,
                                               int64_t run) const;
  /// This rank's slice of parameter `key`'s whole `value` (or its moments').
  Tensor sliceOf(const std::string &key, Tensor value) const;
  /// Opens, together on every rank, the grid groups the stage functions,
  /// the update and the gathers use (DeviceGrid::openGroup): pipeline ranks
  /// reach their first collectives at different points of the schedule.
  void openGroups();

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp update_;
  Signature sig_; ///< update_'s
  DeviceGrid &grid_;
  int16_t ppAxis_;
  int64_t pipelineRank_, numStages_, accumulation_;
  /// The grid axes of the pipeline's replicas (dp_replicate), their number
  /// and this one's index.
  std::vector<int16_t> replicaAxes_;
  int64_t replicas_ = 1, replica_ = 0;
  /// Whether the stages are partitioned (several ranks to a stage), and the
  /// data-parallel row groups each microbatch's rows split into: the
  /// replicas, or every data-parallel rank of partitioned stages.
  bool partitioned_ = false;
  int64_t rowGroups_ = 1;
  /// The order of each sequence's tokens before it is sliced over cp
  /// (torchtitan's head-tail chunks, or natural).
  SequenceLayout sequence_;
  /// How partitioned stages split each parameter (and its moments) and
  /// each data input, by HF key or input name; absent: whole.
  std::map<std::string, Sharding> shardings_, inputShardings_;
  PipelineSchedule schedule_;
  ExecutionContext execution_;
  /// @train_step's arguments between steps (the gradient slots empty).
  std::vector<Tensor> state_;
  /// For each parameter of this rank used on other ranks too, by key: the
  /// pipeline ranks using it (ascending).
  std::map<std::string, std::vector<int64_t>> shared_;
  /// Every stage's parameters by key: the lowest pipeline rank holding it,
  /// its type on a rank (a shard of partitioned stages') and whole.
  struct Owner {
    int64_t rank;
    mlir::Type local, whole;
  };
  std::map<std::string, Owner> owners_;
};

} // namespace kiln

#endif // KILN_DRIVER_PIPELINETRAINING_H
