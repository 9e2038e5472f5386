//===- ParallelLayout.h - Degrees of parallelism, resolved -------*- C++ -*-===//
//
// torchtitan's `parallelism` options resolved against the world size and the
// model: the device grid [dp_replicate, dp_shard, tp] (torchtitan's mesh
// order, tp fastest), with every inconsistent layout rejected by an error that
// names the option and the numbers.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PARALLELLAYOUT_H
#define KILN_DRIVER_PARALLELLAYOUT_H

#include "kiln/Driver/TrainConfig.h"
#include "kiln/Frontend/Qwen3Config.h"

#include <array>
#include <cstdint>
#include <string>

namespace kiln {

struct ParallelLayout {
  int64_t dpReplicate = 1, dpShard = 1, tp = 1;
  /// Sequence parallelism in effect: enabled and tp > 1.
  bool sequenceParallel = false;
  std::string reshardAfterForward = "default";

  /// The grid axes, in order.
  static constexpr std::array<const char *, 3> kAxisNames{"dp_replicate", "dp_shard", "tp"};
  std::array<int64_t, 3> shape() const { return {dpReplicate, dpShard, tp}; }
  int64_t worldSize() const { return dpReplicate * dpShard * tp; }
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
