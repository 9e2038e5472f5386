//===- KilnLocalize.cpp - Each op's local form on one rank ----------------===//
//
// ShardingRuleOpInterface::localize of the ops whose clone on a rank's
// operands needs more than local types: attributes that name the rank's
// share of a split loop. kiln-partition calls it on every clone; ops that
// expand into several ops under a split (a norm over split tensors, a
// cross-entropy over a split vocabulary) are the pass's own.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

using namespace mlir;
using namespace kiln;

namespace {

int64_t dimSize(Value v, unsigned dim) {
  return cast<RankedTensorType>(v.getType()).getDimSize(dim);
}

/// Experts split over grid axes (expert parallelism): the clone runs the
/// rank's block of them; pairs routed elsewhere give nothing.
template <typename OpTy>
void localizeExperts(OpTy op, Operation *clone, const LoopSharding &loops) {
  const GridAxes &experts =
      loops[op.getShardingRule().operands[op.getW1Mutable().getOperandNumber()][0]];
  if (experts.empty())
    return;
  auto local = cast<OpTy>(clone);
  local.setExpertAxes(ArrayRef<int16_t>(experts));
  local.setNumExperts(dimSize(op.getW1(), 0));
}

/// The dispatcher's ops on a rank's token chunks: `tokens` is the operand
/// whose batch dimension the chunks are rows of.
template <typename OpTy>
LogicalResult localizeChunks(OpTy op, Operation *clone, OpOperand &tokens,
                             const LoopSharding &loops, ArrayRef<int64_t> gridShape) {
  const GridAxes &batch = loops[op.getShardingRule().operands[tokens.getOperandNumber()][0]];
  int64_t chunks = op.getChunks(), ranks = gridGroupSize(gridShape, batch);
  if (chunks % ranks)
    return op.emitOpError() << "kiln-partition: its batch splits over " << ranks
                            << " ranks, which do not divide its " << chunks
                            << " token chunks (kiln-expert-dispatch's chunks must be a "
                               "multiple of the data-parallel degree)";
  cast<OpTy>(clone).setChunks(chunks / ranks);
  return success();
}

/// A mean over split positions divides by the global count.
template <typename OpTy> void localizeMean(OpTy op, Operation *clone, const LoopSharding &loops) {
  if (anySplit(loops))
    cast<OpTy>(clone).setTotalPositions(
        cast<RankedTensorType>(op.getLabels().getType()).getNumElements());
}

/// Attention on the rank's block of the queries: which axes split them.
template <typename OpTy>
void localizeQueries(OpTy op, Operation *clone, const LoopSharding &loops) {
  const GridAxes &queries =
      loops[op.getShardingRule().operands[op.getQMutable().getOperandNumber()][1]];
  if (!queries.empty())
    cast<OpTy>(clone).setQueryAxes(ArrayRef<int16_t>(queries));
}

} // namespace

LogicalResult AttentionOp::localize(Operation *clone, const LoopSharding &loops,
                                    ArrayRef<int64_t>) {
  localizeQueries(*this, clone, loops);
  return success();
}
LogicalResult AttentionBackwardOp::localize(Operation *clone, const LoopSharding &loops,
                                            ArrayRef<int64_t>) {
  localizeQueries(*this, clone, loops);
  return success();
}

// A reshape's target shape is the local one.
LogicalResult ReshapeOp::localize(Operation *clone, const LoopSharding &, ArrayRef<int64_t>) {
  auto local = cast<ReshapeOp>(clone);
  local.setShape(cast<RankedTensorType>(local.getType()).getShape());
  return success();
}

// A lookup in a vocabulary shard: ids held elsewhere give nothing.
LogicalResult EmbeddingOp::localize(Operation *clone, const LoopSharding &loops,
                                    ArrayRef<int64_t>) {
  const GridAxes &vocab = loops[getShardingRule().operands[0][0]];
  if (!vocab.empty())
    cast<EmbeddingOp>(clone).setVocabAxes(ArrayRef<int16_t>(vocab));
  return success();
}

// The gradient of a vocabulary shard: the rank's rows of the table.
LogicalResult EmbeddingBackwardOp::localize(Operation *clone, const LoopSharding &loops,
                                            ArrayRef<int64_t>) {
  const GridAxes &vocab = loops[getShardingRule().results[0][0]];
  if (vocab.empty())
    return success();
  auto local = cast<EmbeddingBackwardOp>(clone);
  local.setVocabAxes(ArrayRef<int16_t>(vocab));
  local.setVocabSize(dimSize(local.getTableGrad(), 0));
  return success();
}

LogicalResult CrossEntropyOp::localize(Operation *clone, const LoopSharding &loops,
                                       ArrayRef<int64_t>) {
  localizeMean(*this, clone, loops);
  return success();
}

LogicalResult CrossEntropyBackwardOp::localize(Operation *clone, const LoopSharding &loops,
                                               ArrayRef<int64_t>) {
  localizeMean(*this, clone, loops);
  return success();
}

LogicalResult GroupedExpertsOp::localize(Operation *clone, const LoopSharding &loops,
                                         ArrayRef<int64_t>) {
  localizeExperts(*this, clone, loops);
  return success();
}

LogicalResult GroupedExpertsBackwardOp::localize(Operation *clone, const LoopSharding &loops,
                                                 ArrayRef<int64_t>) {
  localizeExperts(*this, clone, loops);
  return success();
}

LogicalResult ExpertDispatchOp::localize(Operation *clone, const LoopSharding &loops,
                                         ArrayRef<int64_t> gridShape) {
  return localizeChunks(*this, clone, getInputMutable(), loops, gridShape);
}

LogicalResult ExpertCombineOp::localize(Operation *clone, const LoopSharding &loops,
                                        ArrayRef<int64_t> gridShape) {
  return localizeChunks(*this, clone, getSlotsMutable(), loops, gridShape);
}

LogicalResult ExpertDispatchBackwardOp::localize(Operation *clone, const LoopSharding &loops,
                                                 ArrayRef<int64_t> gridShape) {
  return localizeChunks(*this, clone, getSlotsMutable(), loops, gridShape);
}

LogicalResult ExpertCombineBackwardOp::localize(Operation *clone, const LoopSharding &loops,
                                                ArrayRef<int64_t> gridShape) {
  return localizeChunks(*this, clone, getSlotsMutable(), loops, gridShape);
}

// A kernel call adapts its own options (e.g. the fused loss's count).
LogicalResult KernelOp::localize(Operation *clone, const LoopSharding &loops, ArrayRef<int64_t>) {
  getSpec().localize(clone, *this, anySplit(loops), loops);
  return success();
}

LogicalResult KernelBackwardOp::localize(Operation *clone, const LoopSharding &loops,
                                         ArrayRef<int64_t>) {
  getSpec().localize(clone, *this, anySplit(loops), loops);
  return success();
}
