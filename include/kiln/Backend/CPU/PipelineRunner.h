//===- PipelineRunner.h - A pipeline schedule run on MPI ranks ---*- C++ -*-===//
//
// The runtime side of "schedules are data": a pipeline rank walks its
// actions (PipelineSchedule.h) in order, calling its stages' forward and
// backward and moving what crosses stages to the neighbouring pipeline ranks
// over MPI (sends without blocking, receives waiting), so every rank runs
// exactly the order the compiler chose and the planner timed.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_CPU_PIPELINERUNNER_H
#define KILN_BACKEND_CPU_PIPELINERUNNER_H

#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Config/PipelineSchedule.h"

#include <functional>
#include <utility>
#include <vector>

namespace kiln {

/// What one pipeline rank computes; the runner carries the tensors.
struct PipelineStageCalls {
  /// Stage `stage`'s forward of microbatch `m` on what the previous stage
  /// sent (nothing for the first); returns what the next stage receives
  /// (nothing for the last).
  std::function<std::vector<Tensor>(int64_t stage, int64_t m, std::vector<Tensor> received)>
      forward;
  /// Its backward, on the cotangents of what it sent (nothing for the
  /// last); returns the cotangents of what it received (nothing for the
  /// first).
  std::function<std::vector<Tensor>(int64_t stage, int64_t m, std::vector<Tensor> cotangents)>
      backward;
  /// The dtype and shape of each tensor crossing from stage b to b + 1 (its
  /// cotangent going back has the same).
  std::function<std::vector<std::pair<DType, Shape>>(int64_t b)> transfers;
};

/// Runs pipeline rank `pipelineRank`'s actions of `schedule`, its peers
/// along grid axis `ppAxis`, and waits for its sends. Throws kiln::Error
/// when a call returns other than `transfers` says, or the tags the
/// schedule needs exceed MPI's.
void runPipelineSchedule(const PipelineSchedule &schedule, int64_t pipelineRank,
                         const PipelineStageCalls &calls, DeviceGrid &grid, int16_t ppAxis);

/// The sum of an f32 `value` over the pipeline ranks `holders` (ascending,
/// this rank among them) along grid axis `ppAxis`, on each of them: a tied
/// table's gradient from its first and last stages. The first holder adds
/// the others' in rank order and sends the sum back, so every holder gets
/// the same bits; `tag` must be unique among the sums in flight.
Tensor sumOverPipelineRanks(Tensor value, const std::vector<int64_t> &holders, int64_t pipelineRank,
                            DeviceGrid &grid, int16_t ppAxis, int tag);

} // namespace kiln

#endif // KILN_BACKEND_CPU_PIPELINERUNNER_H
