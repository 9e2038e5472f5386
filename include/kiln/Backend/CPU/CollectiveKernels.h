//===- CollectiveKernels.h - shard collectives on MPI ranks ------*- C++ -*-===//
#ifndef KILN_BACKEND_CPU_COLLECTIVEKERNELS_H
#define KILN_BACKEND_CPU_COLLECTIVEKERNELS_H

#include "mlir/IR/DialectRegistry.h"

namespace kiln {
/// Attaches CpuKernelOpInterface to upstream shard.all_gather,
/// reduce_scatter, all_reduce, all_to_all and all_slice (run on
/// ExecutionContext::grid).
void registerCollectiveKernels(mlir::DialectRegistry &registry);
} // namespace kiln

#endif // KILN_BACKEND_CPU_COLLECTIVEKERNELS_H
