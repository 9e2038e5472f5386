//===- Collective.h - Collectives of a per-rank program and their cost -*- C++ -*-===//
//
// A shard collective of a per-rank program described for costing: its kind,
// the grid axes and ranks it runs over, the bytes it moves, where its group
// sits on the machine (how many nodes and devices it spans) and its time by
// the alpha-beta model of a ring (docs/planner.md):
//
//   all_gather, reduce_scatter, all_to_all:  (n-1) α + (n-1)/n · S / β
//   all_reduce (reduce-scatter + all-gather): 2(n-1) α + 2(n-1)/n · S / β
//
// with S the gathered, reduced or exchanged tensor, α the link's latency per
// ring step and β the bandwidth one rank gets on the slowest link its group
// crosses, times the profile's collective efficiency.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PLANNER_COLLECTIVE_H
#define KILN_PLANNER_COLLECTIVE_H

#include "kiln/Planner/TargetProfile.h"

#include "mlir/IR/Operation.h"

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

class ValuePrecision;

enum class CollectiveKind { AllGather, ReduceScatter, AllReduce, AllToAll, Local };
/// "all_gather", "reduce_scatter", "all_reduce", "all_to_all", "local".
const char *collectiveKindName(CollectiveKind kind);

struct Collective {
  CollectiveKind kind = CollectiveKind::Local;
  std::string axes;       ///< grid axis names joined by '+': "dp_shard"
  int64_t groupSize = 1;  ///< ranks in one group
  int64_t messageBytes = 0; ///< S: the whole gathered, reduced or exchanged tensor
  int64_t bytesSent = 0;  ///< per rank, by the ring algorithm
  int64_t steps = 0;      ///< ring steps (latency terms)
};

/// The collective `op` performs, or nullopt for anything but a shard op on a
/// grid. Tensor bytes are at `precision` when given, else at IR types.
std::optional<Collective> describeCollective(mlir::Operation *op,
                                             const ValuePrecision *precision = nullptr);

/// Where a group of ranks sits: the ranks of a device (node) share its links;
/// a group with m of a unit's r ranks gets m/r of their bandwidth.
struct GroupPlacement {
  int64_t nodes = 1;              ///< nodes the group spans
  int64_t membersPerNode = 1;     ///< of the group's ranks, how many share a node
  int64_t membersPerDevice = 1;   ///< ... and a device
};

/// The placement of the group of rank 0 over grid axes `axes` of `gridShape`
/// (ranks numbered with the last axis fastest) on `target`.
GroupPlacement placeGroup(llvm::ArrayRef<int64_t> gridShape, llvm::ArrayRef<int16_t> axes,
                          const TargetProfile &target);

enum class CollectiveAlgorithm { Ring, TwoLevel };

struct CollectiveTime {
  double seconds = 0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
};

/// The time of collective `c` for a group placed as `placement` on `target`
/// by the faster of a flat ring and, for a group spanning nodes with several
/// members on each, the two-level algorithm.
CollectiveTime collectiveTime(const Collective &c, const GroupPlacement &placement,
                              const TargetProfile &target);
/// collectiveTime's seconds.
double collectiveSeconds(const Collective &c, const GroupPlacement &placement,
                         const TargetProfile &target);

/// A point-to-point send of `bytes` between the two ranks of a group placed
/// as `placement` (a pipeline's activation or cotangent to the next or
/// previous stage): one latency and the bytes over the slowest link the pair
/// crosses, as a ring step of two members takes them.
double sendSeconds(int64_t bytes, const GroupPlacement &placement, const TargetProfile &target);
/// The ring time itself: steps · latency + bytesSent / bandwidth.
double ringSeconds(int64_t steps, int64_t bytesSent, double latencySeconds, double bandwidth);

} // namespace kiln

#endif // KILN_PLANNER_COLLECTIVE_H
