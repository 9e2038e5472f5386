//===- ReplicaGroups.cpp - XLA replica groups of a device grid ------------===//

#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"

#include "llvm/ADT/STLExtras.h"


namespace kiln::hlo {

std::vector<int64_t> gridCoordinates(llvm::ArrayRef<int64_t> grid, int64_t rank) {
  std::vector<int64_t> coords(grid.size());
  for (int64_t i = int64_t(grid.size()) - 1; i >= 0; --i) {
    coords[i] = rank % grid[i];
    rank /= grid[i];
  }
  return coords;
}

int64_t gridGroupIndex(llvm::ArrayRef<int64_t> grid, llvm::ArrayRef<int16_t> axes,
                       int64_t rank) {
  std::vector<int64_t> c = gridCoordinates(grid, rank);
  int64_t index = 0;
  for (int16_t a : axes)
    index = index * grid[a] + c[a];
  return index;
}

std::vector<std::vector<int64_t>> gridReplicaGroups(llvm::ArrayRef<int64_t> grid,
                                                    llvm::ArrayRef<int16_t> axes) {
  int64_t world = 1, size = 1;
  for (int64_t s : grid)
    world *= s;
  for (int16_t a : axes)
    size *= grid[a];
  // Group: the coordinates off `axes` (row-major, the groups' order); place
  // in it: the index along `axes`. One pass, no per-rank allocation: FSDP
  // over a large world lists every rank.
  std::vector<std::vector<int64_t>> result(size_t(world / size),
                                           std::vector<int64_t>(size_t(size)));
  std::vector<int64_t> c(grid.size(), 0);
  for (int64_t rank = 0; rank < world; ++rank) {
    int64_t group = 0, index = 0;
    for (size_t a = 0; a < grid.size(); ++a)
      if (!llvm::is_contained(axes, int16_t(a)))
        group = group * grid[a] + c[a];
    for (int16_t a : axes)
      index = index * grid[a] + c[a];
    result[size_t(group)][size_t(index)] = rank;
    // The next rank's coordinates: the last axis fastest.
    for (int64_t i = int64_t(grid.size()) - 1; i >= 0 && ++c[i] == grid[i]; --i)
      c[i] = 0;
  }
  return result;
}

} // namespace kiln::hlo
