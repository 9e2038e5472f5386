//===- ReplicaGroups.cpp - XLA replica groups of a device grid ------------===//

#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"

#include "llvm/ADT/STLExtras.h"

#include <map>

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
  int64_t world = 1;
  for (int64_t s : grid)
    world *= s;
  // Colour: the coordinates off `axes`; key: the index along them.
  std::map<int64_t, std::map<int64_t, int64_t>> groups;
  for (int64_t rank = 0; rank < world; ++rank) {
    std::vector<int64_t> c = gridCoordinates(grid, rank);
    int64_t color = 0;
    for (size_t a = 0; a < grid.size(); ++a)
      if (!llvm::is_contained(axes, int16_t(a)))
        color = color * grid[a] + c[a];
    groups[color][gridGroupIndex(grid, axes, rank)] = rank;
  }
  std::vector<std::vector<int64_t>> result;
  for (auto &[color, members] : groups) {
    result.emplace_back();
    for (auto &[index, rank] : members)
      result.back().push_back(rank);
  }
  return result;
}

} // namespace kiln::hlo
