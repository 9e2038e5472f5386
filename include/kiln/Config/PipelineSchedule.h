//===- PipelineSchedule.h - A pipeline schedule as data ----------*- C++ -*-===//
//
// A pipeline schedule is, for each pipeline rank, the ordered list of what
// it does in one step: the forward or backward of microbatch m on stage s,
// and the point-to-point transfers around them (the activation to the next
// stage after a forward, received before the next stage's forward; the
// cotangent to the previous stage after a backward). The compiler emits it,
// `kiln capture --dump-ranks` prints it, the runtime executes it and the
// planner times it, so all of them run the same order.
//
// Sends do not block (MPI_Isend) and receives do, so a schedule runs when
// every receive's send comes earlier in its sender's order; simulate()
// proves that by running the lists, and times them.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_CONFIG_PIPELINESCHEDULE_H
#define KILN_CONFIG_PIPELINESCHEDULE_H

#include "kiln/Support/ClosedSets.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// Whether `schedule` runs one stage per rank (GPipe, 1F1B); the looped
/// ones (Interleaved1F1B) run several.
bool isSingleStageSchedule(PipelineScheduleKind schedule);

/// The pipeline rank that runs `stage` of a pipeline of `degree` ranks:
/// looped placement, stage s on rank s % degree.
inline int64_t pipelineRankOf(int64_t stage, int64_t degree) { return stage % degree; }

enum class PipelineActionKind {
  Forward,
  Backward,
  SendActivation, ///< after stage s's forward: its output to stage s + 1
  RecvActivation, ///< before stage s's forward: stage s - 1's output
  SendGradient,   ///< after stage s's backward: its input's cotangent to s - 1
  RecvGradient,   ///< before stage s's backward: the cotangent of its output
};

struct PipelineAction {
  PipelineActionKind kind;
  int64_t stage; ///< the stage on this rank that computes or transfers
  int64_t microbatch;

  bool isCompute() const {
    return kind == PipelineActionKind::Forward || kind == PipelineActionKind::Backward;
  }
  /// The stage on the other end of a transfer.
  int64_t peerStage() const;
  /// torch.distributed.pipelining's notation: "1F0", "0SEND_F2", "1RECV_B0".
  std::string str() const;
};

struct PipelineSchedule {
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  int64_t degree = 1, stagesPerRank = 1, microbatches = 1;
  /// Each pipeline rank's actions, in order.
  std::vector<std::vector<PipelineAction>> ranks;

  int64_t numStages() const { return degree * stagesPerRank; }
  int64_t rankOf(int64_t stage) const { return pipelineRankOf(stage, degree); }
  /// Rank `rank`'s actions, one per line (str()).
  std::string str(int64_t rank) const;
};

/// `kind`'s order of `microbatches` microbatches over `degree` ranks
/// holding `stagesPerRank` stages each (stage s on rank s % degree):
/// - GPipe: every forward, then every backward;
/// - 1F1B: `degree - rank - 1` forwards, then one forward and one backward
///   in turn, then the remaining backwards (PipeDream-Flush);
/// - Interleaved1F1B: Megatron's interleaving as torch.distributed.pipelining
///   orders it: microbatches in rounds of `microbatches / rounds` over the
///   rank's stages, `(stagesPerRank - 1) * perRound + 2 * (degree - rank - 1)`
///   forwards of warm-up.
/// Throws kiln::Error naming the options for a count the schedule cannot
/// run (1F1B and Interleaved1F1B need at least `degree` microbatches;
/// Interleaved1F1B's microbatches must divide into equal rounds).
PipelineSchedule buildPipelineSchedule(PipelineScheduleKind kind, int64_t degree,
                                       int64_t stagesPerRank, int64_t microbatches);

/// `schedule`'s forwards alone, as evaluation runs them: each rank's
/// forward, send-activation and receive-activation actions in their order
/// (dropping receives only removes waits, so it runs wherever `schedule`
/// does).
PipelineSchedule forwardOnly(const PipelineSchedule &schedule);

/// One action's place in time on its rank.
struct TimedAction {
  PipelineAction action;
  double start, end;
};

struct PipelineTimeline {
  std::vector<std::vector<TimedAction>> ranks;
  /// When the last rank finishes its last action.
  double makespan = 0;
  /// The share of makespan x degree that ranks spend not computing.
  double bubbleFraction = 0;
  /// Per rank: the most microbatches whose forward ran and backward did not,
  /// over its stages together (the activations it holds at its peak).
  std::vector<int64_t> peakInFlight;
};

/// Per rank: the most bytes it holds at once when stage s's forward of a
/// microbatch keeps `bytesPerStage[s]` until that microbatch's backward
/// (the activations in flight, by the rank's own order).
std::vector<int64_t> peakHeldBytes(const PipelineSchedule &schedule,
                                   const std::vector<int64_t> &bytesPerStage);

/// Runs `schedule` with a forward taking `forwardTime`, a backward
/// `backwardTime` and a transfer arriving `transferTime` after its send; a
/// receive waits for its send. Throws kiln::Error naming the stuck ranks and
/// actions when the order deadlocks, and for an action list that does not
/// forward and backward every microbatch of every stage once, on its rank.
PipelineTimeline simulate(const PipelineSchedule &schedule, double forwardTime, double backwardTime,
                          double transferTime = 0);
/// The same with stage s's forward taking `forwardTimes[s]` and its backward
/// `backwardTimes[s]` (stages of unequal work: the embedding's, the output's).
PipelineTimeline simulate(const PipelineSchedule &schedule, const std::vector<double> &forwardTimes,
                          const std::vector<double> &backwardTimes, double transferTime = 0);

} // namespace kiln

#endif // KILN_CONFIG_PIPELINESCHEDULE_H
