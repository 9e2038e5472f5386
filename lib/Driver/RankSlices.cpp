//===- RankSlices.cpp - Whole tensors and each rank's slices --------------===//

#include "kiln/Driver/RankSlices.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Support/Diagnostics.h"

#include <fmt/format.h>

#include <cstring>

namespace kiln {

std::optional<Sharding> argSharding(mlir::func::FuncOp fn, unsigned arg) {
  mlir::Attribute attr = fn.getArgAttr(arg, kShardingAttr);
  if (!attr)
    return std::nullopt;
  std::optional<Sharding> sharding;
  succeedOrFail(*fn.getContext(), fmt::format("@{}: argument #{}", fn.getName().str(), arg), [&] {
    mlir::FailureOr<Sharding> s = Sharding::fromAttr(
        attr, mlir::cast<mlir::RankedTensorType>(fn.getArgumentTypes()[arg]).getRank(),
        gridAxisNames(fn), [&] { return fn.emitError(); });
    if (mlir::succeeded(s))
      sharding = *s;
    return mlir::LogicalResult(s);
  });
  return sharding;
}

namespace {

/// Applies `step(tensor, axes, dim, padded)` for every split dimension.
template <typename StepFn> Tensor overSplitDims(Tensor t, const Sharding &s, StepFn step) {
  for (auto [d, axes] : llvm::enumerate(s.dims))
    if (!axes.empty())
      t = step(std::move(t), std::vector<int16_t>(axes.begin(), axes.end()), int64_t(d),
               s.padding(d));
  return t;
}

} // namespace

// Uneven FSDP shards (Sharding::paddedTo): each block of the split over all
// but the last axis (the whole dimension, or a tp shard) is zero-padded at
// its end, then the last axis splits it.
Tensor rankSlice(const DeviceGrid &grid, const Sharding &sharding, Tensor full) {
  return overSplitDims(std::move(full), sharding,
                       [&](Tensor t, std::vector<int16_t> axes, int64_t d, int64_t padded) {
                         if (!padded)
                           return grid.slice(t, axes, d);
                         std::vector<int16_t> last{axes.back()};
                         axes.pop_back();
                         if (!axes.empty())
                           t = grid.slice(t, axes, d);
                         t = kernels::padDim(t, d, padded / grid.groupSize(axes));
                         return grid.slice(t, last, d);
                       });
}

Tensor laidOutSequence(Tensor full, SequenceLayout layout) {
  if (!layout.headTailChunks)
    return full;
  int64_t rows = full.dim(0), seq = full.dim(1);
  size_t row = full.nbytes() / size_t(rows * seq);
  Tensor out = Tensor::uninitialized(full.dtype(), full.shape());
  const char *in = static_cast<const char *>(full.rawData());
  char *o = out.mutableData<char>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = 0; x < seq; ++x)
      std::memcpy(o + (r * seq + x) * row, in + (r * seq + layout.position(x, seq)) * row, row);
  return out;
}

Tensor wholeFromSlices(DeviceGrid &grid, const Sharding &sharding, Tensor local,
                       const Shape &globalShape) {
  return overSplitDims(std::move(local), sharding,
                       [&](Tensor t, std::vector<int16_t> axes, int64_t d, int64_t padded) {
                         if (!padded)
                           return grid.allGather(t, axes, d);
                         std::vector<int16_t> last{axes.back()};
                         axes.pop_back();
                         int64_t block = globalShape.at(d) / grid.groupSize(axes);
                         t = kernels::narrowDim(grid.allGather(t, last, d), d, block);
                         return axes.empty() ? t : grid.allGather(t, axes, d);
                       });
}

} // namespace kiln
