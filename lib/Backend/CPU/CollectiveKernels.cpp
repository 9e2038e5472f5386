//===- CollectiveKernels.cpp - Upstream shard collectives on MPI ranks ----===//
//
// The per-rank vocabulary is upstream's `shard` dialect; the CPU backend
// attaches CpuKernelOpInterface to its collectives, each running on the
// ExecutionContext's DeviceGrid. The grid op the collective names must have
// the shape the program was launched with.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/CPU/CollectiveKernels.h"
#include "kiln/Backend/CPU/CpuKernelInterface.h"
#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace kiln {
namespace {

using In = MutableArrayRef<Tensor>;
using Out = SmallVectorImpl<Tensor>;

/// The context's grid, after checking it is the one `op` runs on.
template <typename OpT> DeviceGrid &gridFor(OpT op, const ExecutionContext &context) {
  if (!context.grid)
    fail("'{}' needs a device grid: run the per-rank program on MPI ranks",
         op->getName().getStringRef().str());
  SymbolTableCollection symbols;
  shard::GridOp grid = shard::getGridOrNull(op, op.getGridAttr(), symbols);
  if (!grid)
    fail("'{}' names no grid @{}", op->getName().getStringRef().str(), op.getGrid().str());
  ArrayRef<int64_t> shape = grid.getShape();
  if (std::vector<int64_t>(shape.begin(), shape.end()) != context.grid->shape())
    fail("grid @{} has shape {} but the ranks run a grid of {}", op.getGrid().str(),
         shapeToString(Shape(shape.begin(), shape.end())),
         shapeToString(context.grid->shape()));
  return *context.grid;
}

std::vector<int16_t> axesOf(ArrayRef<int16_t> axes) { return {axes.begin(), axes.end()}; }

Reduction reductionOf(shard::ReductionKind kind) {
  switch (kind) {
  case shard::ReductionKind::Sum:
    return Reduction::Sum;
  case shard::ReductionKind::Average:
    return Reduction::Average;
  case shard::ReductionKind::Max:
    return Reduction::Max;
  case shard::ReductionKind::Min:
    return Reduction::Min;
  default:
    fail("reduction '{}' is not supported on CPU ranks (sum, average, max, min are)",
         shard::stringifyReductionKind(kind).str());
  }
}

void run(shard::AllGatherOp op, const ExecutionContext &context, In in, Out &out) {
  out.push_back(gridFor(op, context)
                    .allGather(in[0], axesOf(op.getGridAxes()), op.getGatherAxis().getSExtValue()));
}
void run(shard::ReduceScatterOp op, const ExecutionContext &context, In in, Out &out) {
  out.push_back(gridFor(op, context)
                    .reduceScatter(in[0], axesOf(op.getGridAxes()),
                                   op.getScatterAxis().getSExtValue(),
                                   reductionOf(op.getReduction())));
}
void run(shard::AllReduceOp op, const ExecutionContext &context, In in, Out &out) {
  out.push_back(gridFor(op, context)
                    .allReduce(std::move(in[0]), axesOf(op.getGridAxes()),
                               reductionOf(op.getReduction())));
}
void run(shard::AllToAllOp op, const ExecutionContext &context, In in, Out &out) {
  out.push_back(gridFor(op, context)
                    .allToAll(in[0], axesOf(op.getGridAxes()), op.getSplitAxis().getSExtValue(),
                              op.getConcatAxis().getSExtValue()));
}
void run(shard::AllSliceOp op, const ExecutionContext &context, In in, Out &out) {
  out.push_back(gridFor(op, context)
                    .slice(in[0], axesOf(op.getGridAxes()), op.getSliceAxis().getSExtValue()));
}

template <typename OpT>
struct CollectiveKernel : CpuKernelOpInterface::ExternalModel<CollectiveKernel<OpT>, OpT> {
  void runOnCpu(Operation *op, const ExecutionContext &context, In operands,
                Out &results) const {
    run(cast<OpT>(op), context, operands, results);
  }
};

void attachAll(MLIRContext *context, shard::ShardDialect *) {
  shard::AllGatherOp::attachInterface<CollectiveKernel<shard::AllGatherOp>>(*context);
  shard::ReduceScatterOp::attachInterface<CollectiveKernel<shard::ReduceScatterOp>>(*context);
  shard::AllReduceOp::attachInterface<CollectiveKernel<shard::AllReduceOp>>(*context);
  shard::AllSliceOp::attachInterface<CollectiveKernel<shard::AllSliceOp>>(*context);
  shard::AllToAllOp::attachInterface<CollectiveKernel<shard::AllToAllOp>>(*context);
}

} // namespace

std::set<std::vector<int16_t>> collectiveGroups(Operation *root) {
  std::set<std::vector<int16_t>> groups;
  root->walk([&](Operation *op) {
    if (auto c = dyn_cast<shard::AllGatherOp>(op))
      groups.insert(axesOf(c.getGridAxes()));
    else if (auto c = dyn_cast<shard::ReduceScatterOp>(op))
      groups.insert(axesOf(c.getGridAxes()));
    else if (auto c = dyn_cast<shard::AllReduceOp>(op))
      groups.insert(axesOf(c.getGridAxes()));
    else if (auto c = dyn_cast<shard::AllToAllOp>(op))
      groups.insert(axesOf(c.getGridAxes()));
  });
  return groups;
}

void registerCollectiveKernels(DialectRegistry &registry) {
  registry.insert<shard::ShardDialect>();
  registry.addExtension(&attachAll);
}

} // namespace kiln
