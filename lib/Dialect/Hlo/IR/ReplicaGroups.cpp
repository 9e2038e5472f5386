//===- ReplicaGroups.cpp - XLA replica groups of a device grid ------------===//

#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>


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

std::optional<std::vector<int16_t>> gridAxesOf(llvm::ArrayRef<int64_t> grid,
                                               llvm::ArrayRef<int64_t> ids, int64_t groupCount) {
  std::vector<int16_t> live;
  for (size_t a = 0; a < grid.size(); ++a)
    if (grid[a] > 1)
      live.push_back(int16_t(a));
  // Every order of every subset: a grid has a handful of axes. A world of
  // one has no axis to name: its groups are one group of one.
  if (live.empty())
    return groupCount == 1 && ids.size() == 1 && ids[0] == 0
               ? std::optional<std::vector<int16_t>>(std::vector<int16_t>{})
               : std::nullopt;
  for (unsigned mask = 1; mask < (1u << live.size()); ++mask) {
    std::vector<int16_t> axes;
    for (size_t i = 0; i < live.size(); ++i)
      if (mask & (1u << i))
        axes.push_back(live[i]);
    do {
      std::vector<std::vector<int64_t>> expected = gridReplicaGroups(grid, axes);
      bool same = int64_t(expected.size()) == groupCount &&
                  expected.size() * expected.front().size() == ids.size();
      for (size_t g = 0; same && g < expected.size(); ++g)
        same = std::equal(expected[g].begin(), expected[g].end(),
                          ids.begin() + int64_t(g * expected[g].size()));
      if (same)
        return axes;
    } while (std::next_permutation(axes.begin(), axes.end()));
  }
  return std::nullopt;
}

} // namespace kiln::hlo
