//===- RankSlices.h - Whole tensors and each rank's slices -------*- C++ -*-===//
//
// A partitioned program's arguments carry how they are split over the grid
// (kiln.sharding); the runtime binds each rank's slice of a whole tensor (a
// checkpoint's weight, a batch) and gathers the whole one back (a
// checkpoint, a gradient) as that sharding says, FSDP2's padded uneven
// shards included.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_RANKSLICES_H
#define KILN_DRIVER_RANKSLICES_H

#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Support/SequenceLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace kiln {

/// How `fn`'s argument `arg` is split (its kiln.sharding), if it says;
/// throws kiln::Error naming the function and argument for one that does
/// not fit the argument or the module's grid.
std::optional<Sharding> argSharding(mlir::func::FuncOp fn, unsigned arg);

/// This rank's slice of `full` split as `sharding` says on `grid` (no
/// communication). An uneven split's blocks are zero-padded as
/// Sharding::paddedTo describes.
Tensor rankSlice(const DeviceGrid &grid, const Sharding &sharding, Tensor full);

/// `full` [rows, seq, ...] with its sequence laid out as `layout` says:
/// row x of the result's dimension 1 is row layout.position(x) of `full`
/// (context parallelism's head-tail order, which data inputs take before
/// they split over cp); `full` itself in the natural order.
Tensor laidOutSequence(Tensor full, SequenceLayout layout);

/// The whole tensor of `globalShape` from this rank's slice `local`
/// (rankSlice's inverse): gathers over the split axes, so every rank of
/// each of their groups must call it.
Tensor wholeFromSlices(DeviceGrid &grid, const Sharding &sharding, Tensor local,
                       const Shape &globalShape);

} // namespace kiln

#endif // KILN_DRIVER_RANKSLICES_H
