//===- KilnVocabParallelOps.cpp - Loss parallel: shapes, costs, rules -----===//
//
// The ops kiln-partition emits for a cross-entropy whose vocabulary is split
// (see KilnVocabParallelOps.td), and the check of `vocab_axes` they share
// with the vocabulary-parallel embedding. Their sharding rules live with the
// others, in KilnShardingRules.cpp.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "ShapeRules.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::detail;

LogicalResult kiln::detail::verifyGridAxes(Operation *op, std::optional<ArrayRef<int16_t>> axes,
                                           StringRef attrName) {
  return kiln::verifyGridAxes(op, axes, attrName, [op] {
    return op->emitOpError() << "(fqn '" << op->getAttrOfType<StringAttr>("fqn").getValue()
                             << "'): ";
  });
}

namespace {

/// Row statistics: [rows..., 2] for rows [rows...].
bool isStatsOf(RankedTensorType stats, RankedTensorType rows) {
  return stats.getRank() == rows.getRank() + 1 && stats.getShape().drop_back() == rows.getShape() &&
         stats.getShape().back() == 2;
}

} // namespace

//===----------------------------------------------------------------------===//
// VocabParallelMaxOp
//===----------------------------------------------------------------------===//

LogicalResult VocabParallelMaxOp::inferReturnTypes(MLIRContext *context,
                                                   std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  if (failed(checkOperands<VocabParallelMaxOp>(
          loc, adaptor.getFqn(), {{"logits", adaptor.getLogits(), -1, Elt::Float}})))
    return failure();
  types.push_back(RankedTensorType::get(rankedType(adaptor.getLogits()).getShape().drop_back(),
                                        Float32Type::get(context)));
  return success();
}
double VocabParallelMaxOp::getFlops() { return double(getLogits().getType().getNumElements()); }

//===----------------------------------------------------------------------===//
// VocabParallelStatsOp
//===----------------------------------------------------------------------===//

LogicalResult VocabParallelStatsOp::inferReturnTypes(MLIRContext *context,
                                                     std::optional<Location> loc,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<VocabParallelStatsOp>(
          loc, fqn, {{"logits", adaptor.getLogits(), -1, Elt::Float},
                     {"max", adaptor.getMax(), -1, Elt::F32},
                     {"labels", adaptor.getLabels(), -1, Elt::Id}})))
    return failure();
  auto logits = rankedType(adaptor.getLogits());
  if (failed(checkLogitRows<VocabParallelStatsOp>(loc, fqn, "max", rankedType(adaptor.getMax()),
                                             logits)) ||
      failed(checkLogitRows<VocabParallelStatsOp>(loc, fqn, "labels",
                                             rankedType(adaptor.getLabels()), logits)))
    return failure();
  SmallVector<int64_t> shape(logits.getShape().drop_back());
  shape.push_back(2);
  types.push_back(RankedTensorType::get(shape, Float32Type::get(context)));
  return success();
}
LogicalResult VocabParallelStatsOp::verify() { return verifyVocabAxes(*this, getVocabAxes()); }
double VocabParallelStatsOp::getFlops() { return 3.0 * getLogits().getType().getNumElements(); }

//===----------------------------------------------------------------------===//
// VocabParallelLossOp
//===----------------------------------------------------------------------===//

LogicalResult VocabParallelLossOp::inferReturnTypes(MLIRContext *context,
                                                    std::optional<Location> loc,
                                                    Adaptor adaptor,
                                                    SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<VocabParallelLossOp>(
          loc, fqn, {{"max", adaptor.getMax(), -1, Elt::F32},
                     {"stats", adaptor.getStats(), -1, Elt::F32}})))
    return failure();
  auto max = rankedType(adaptor.getMax()), stats = rankedType(adaptor.getStats());
  if (!isStatsOf(stats, max))
    return shapeError<VocabParallelLossOp>(loc, fqn, "stats ", stats,
                                           " must be max's shape plus a dimension of 2, max ",
                                           max);
  types.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}
double VocabParallelLossOp::getFlops() { return 3.0 * getMax().getType().getNumElements(); }

//===----------------------------------------------------------------------===//
// VocabParallelLossBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult VocabParallelLossBackwardOp::inferReturnTypes(MLIRContext *,
                                                            std::optional<Location> loc,
                                                            Adaptor adaptor,
                                                            SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<VocabParallelLossBackwardOp>(
          loc, fqn, {{"logits", adaptor.getLogits(), -1, Elt::Float},
                     {"labels", adaptor.getLabels(), -1, Elt::Id},
                     {"loss_grad", adaptor.getLossGrad(), 0, Elt::F32},
                     {"max", adaptor.getMax(), -1, Elt::F32},
                     {"stats", adaptor.getStats(), -1, Elt::F32}})))
    return failure();
  auto logits = rankedType(adaptor.getLogits()), max = rankedType(adaptor.getMax());
  if (failed(checkLogitRows<VocabParallelLossBackwardOp>(loc, fqn, "labels",
                                                    rankedType(adaptor.getLabels()), logits)) ||
      failed(checkLogitRows<VocabParallelLossBackwardOp>(loc, fqn, "max", max, logits)))
    return failure();
  if (!isStatsOf(rankedType(adaptor.getStats()), max))
    return shapeError<VocabParallelLossBackwardOp>(
        loc, fqn, "stats ", adaptor.getStats().getType(),
        " must be max's shape plus a dimension of 2, max ", max);
  types.push_back(logits);
  return success();
}
LogicalResult VocabParallelLossBackwardOp::verify() {
  return verifyVocabAxes(*this, getVocabAxes());
}
double VocabParallelLossBackwardOp::getFlops() {
  return 4.0 * getLogits().getType().getNumElements();
}
