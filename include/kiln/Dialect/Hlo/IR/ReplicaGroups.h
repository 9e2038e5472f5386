//===- ReplicaGroups.h - XLA replica groups of a device grid -----*- C++ -*-===//
//
// Ranks on a row-major grid (the last axis fastest, as DeviceGrid numbers
// MPI ranks): a collective over a set of axes runs among the ranks that
// share every other coordinate, ordered by their coordinates along the axes
// in the order the set lists them. These are the replica groups of XLA's
// flattened-id collectives.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_HLO_IR_REPLICAGROUPS_H
#define KILN_DIALECT_HLO_IR_REPLICAGROUPS_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::hlo {

/// Coordinates of `rank`.
std::vector<int64_t> gridCoordinates(llvm::ArrayRef<int64_t> grid, int64_t rank);
/// Position of `rank` in its group along `axes`.
int64_t gridGroupIndex(llvm::ArrayRef<int64_t> grid, llvm::ArrayRef<int16_t> axes, int64_t rank);
/// Every group along `axes`, each listing its ranks by group index.
std::vector<std::vector<int64_t>> gridReplicaGroups(llvm::ArrayRef<int64_t> grid,
                                                    llvm::ArrayRef<int16_t> axes);

/// The inverse: the axes whose groups are `ids` (`groupCount` groups of equal
/// size, row by row), or nullopt when no set of axes has them. Only axes of
/// size > 1 are named, so that the answer is unique (an axis of one changes
/// no group).
std::optional<std::vector<int16_t>> gridAxesOf(llvm::ArrayRef<int64_t> grid,
                                               llvm::ArrayRef<int64_t> ids, int64_t groupCount);

} // namespace kiln::hlo

#endif // KILN_DIALECT_HLO_IR_REPLICAGROUPS_H
