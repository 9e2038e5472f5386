//===- CollectiveKernels.h - shard collectives on MPI ranks ------*- C++ -*-===//
#ifndef KILN_BACKEND_CPU_COLLECTIVEKERNELS_H
#define KILN_BACKEND_CPU_COLLECTIVEKERNELS_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Operation.h"

#include <cstdint>
#include <set>
#include <vector>

namespace kiln {
/// Attaches CpuKernelOpInterface to upstream shard.all_gather,
/// reduce_scatter, all_reduce, all_to_all and all_slice (run on
/// ExecutionContext::grid).
void registerCollectiveKernels(mlir::DialectRegistry &registry);

/// The grid axes of every shard collective under `root`, each list as the
/// op gives it (a group's ranks are ordered by it): the groups whose
/// communicators running `root` opens (DeviceGrid::openGroup).
std::set<std::vector<int16_t>> collectiveGroups(mlir::Operation *root);
} // namespace kiln

#endif // KILN_BACKEND_CPU_COLLECTIVEKERNELS_H
