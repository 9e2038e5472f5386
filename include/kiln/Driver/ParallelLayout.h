//===- ParallelLayout.h - Degrees of parallelism, resolved -------*- C++ -*-===//
//
// torchtitan's `parallelism` options resolved against the world size and the
// model: the device grid [dp_replicate, dp_shard, tp] (torchtitan's mesh
// order, tp fastest), or [dp_replicate, dp_shard, ep, tp] under expert
// parallelism (EP borrows its ranks from dp_shard, as in torchtitan: the grid's
// dp_shard axis is then dp_shard / ep), with every inconsistent layout
// rejected by an error that names the option and the numbers.
//
// Pipeline parallelism adds the outermost axis, `pp` (torchtitan's mesh:
// [pp, dp_replicate, dp_shard, tp]), with the stages its ranks run; context
// parallelism an axis `cp` before tp (torchtitan's [..., dp_shard, cp, tp]),
// whose ranks take the same rows and split their sequence.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PARALLELLAYOUT_H
#define KILN_DRIVER_PARALLELLAYOUT_H

#include "kiln/Config/PipelineSchedule.h"
#include "kiln/Config/PipelineStages.h"
#include "kiln/Driver/TrainConfig.h"
#include "kiln/Frontend/Qwen3Config.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Support/SequenceLayout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct ParallelLayout {
  /// The most ranks a layout may have, and any one degree (the pipeline's).
  static constexpr int64_t kMaxRanks = KilnPipelineOptions::kMaxRanks;

  /// dpShard is data_parallel_shard_degree, the FSDP degree of every
  /// non-expert parameter; ep of those ranks split the experts.
  int64_t dpReplicate = 1, dpShard = 1, tp = 1, ep = 1;
  /// Pipeline ranks, the stages they run and the schedule's settings; one
  /// stage of every module without pipeline parallelism (pp = 1).
  int64_t pp = 1;
  PipelineStages stages;
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  int64_t microbatchSize = 1;
  /// Sequence parallelism in effect: enabled and tp > 1.
  bool sequenceParallel = false;
  /// Context parallelism: ranks of the grid axis cp (before tp) each
  /// sequence splits over, laid out head-tail (cpHeadTail) or in order.
  int64_t cp = 1;
  bool cpHeadTail = true;
  ReshardAfterForward reshardAfterForward = ReshardAfterForward::Default;
  /// MoE token dispatch (all_to_all: kiln-expert-dispatch, with
  /// `capacityFactor`, 0 dropping nothing).
  ExpertDispatcher expertDispatch = ExpertDispatcher::AllGather;
  double capacityFactor = 0;

  /// The grid axes, in order, and their sizes.
  std::vector<std::string> axisNames() const;
  std::vector<int64_t> shape() const;
  int64_t worldSize() const { return pp * dpReplicate * dpShard * cp * tp; }
  /// How the data inputs' sequence is laid out before it splits over cp.
  SequenceLayout sequenceLayout() const {
    return SequenceLayout{cp > 1 && cpHeadTail ? 2 * cp : 0};
  }
  /// The pipeline rank of global rank `rank` (its coordinate on pp).
  int64_t pipelineRankOf(int64_t rank) const { return rank / (worldSize() / pp); }
  /// The schedule of a step in which each data-parallel rank takes
  /// `localBatchSize` rows (training.local_batch_size): microbatches of
  /// microbatchSize rows. Throws naming the options when they do not divide
  /// or the schedule cannot run that many.
  PipelineSchedule pipelineSchedule(int64_t localBatchSize) const;
  /// How the experts are laid out, for reports: "experts over ep 2 of
  /// dp_shard" and, with the all-to-all dispatcher, how tokens reach them;
  /// empty when neither applies.
  std::string expertsSummary() const;
  /// The context-parallel axis for a layout line, " x cp 2 (head-tail
  /// sequence)"; empty without context parallelism.
  std::string cpSummary() const;
  /// Ranks that see different data: dp_replicate x dp_shard.
  int64_t dataParallelDegree() const { return dpReplicate * dpShard; }

  /// Resolves data_parallel_shard_degree = -1 and checks the layout against
  /// `launchedWorld` (the ranks mpiexec started; 1 without MPI), the model's
  /// heads and vocabulary and the sequence length.
  static ParallelLayout resolve(const TrainConfig::Parallelism &options,
                                const Qwen3Config &model, int64_t seqLen,
                                int64_t launchedWorld);

  /// The rows of a global batch of `rows` that data-parallel rank `dpRank`
  /// takes: [first, first + count). Throws naming `source` when `rows` is not
  /// a multiple of the data-parallel degree.
  std::pair<int64_t, int64_t> batchRows(int64_t rows, int64_t dpRank,
                                        const std::string &source) const;
};

} // namespace kiln

#endif // KILN_DRIVER_PARALLELLAYOUT_H
