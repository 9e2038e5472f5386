//===- KilnExpertDispatchOps.cpp - Shape rules of the token dispatcher ----===//
//
// kiln.expert_dispatch, kiln.expert_combine and their backward ops. Their
// VJPs are in KilnVjp.cpp and their sharding rules in
// KilnShardingRules.cpp, with every other op's.
//
//===----------------------------------------------------------------------===//

#include "ShapeRules.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::detail;

namespace {

/// The buffer of `groups` blocks of `chunks * capacity` rows of `hidden`.
SmallVector<int64_t> bufferShape(int64_t groups, int64_t chunks, int64_t capacity,
                                 int64_t hidden) {
  return {groups, chunks * capacity, hidden};
}

/// The tokens' leading shape [B, ...] splits into `chunks` whole rows of B.
template <typename OpT>
LogicalResult checkChunks(std::optional<Location> loc, StringRef fqn, RankedTensorType slots,
                          int64_t chunks) {
  if (slots.getRank() < 2)
    return shapeError<OpT>(loc, fqn, "slots ", slots, " must be [B, ..., k]");
  if (chunks < 1 || slots.getDimSize(0) % chunks)
    return shapeError<OpT>(loc, fqn, "chunks = ", chunks, " must be positive and divide the ",
                           slots.getDimSize(0), " rows of the batch");
  return success();
}

/// A buffer [groups, chunks * capacity, H]: its capacity per chunk.
template <typename OpT>
FailureOr<int64_t> capacityOf(std::optional<Location> loc, StringRef fqn, StringRef name,
                              RankedTensorType rows, int64_t chunks) {
  if (rows.getRank() != 3 || rows.getDimSize(1) % chunks)
    return shapeError<OpT>(loc, fqn, name, " ", rows,
                           " must be [groups, chunks * capacity, hidden] with chunks = ",
                           chunks);
  return rows.getDimSize(1) / chunks;
}

} // namespace

//===----------------------------------------------------------------------===//
// ExpertDispatchOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertDispatchOp::inferReturnTypes(MLIRContext *context,
                                                 std::optional<Location> loc, Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<ExpertDispatchOp>(loc, fqn,
                                             {{"input", adaptor.getInput(), -1, Elt::Float},
                                              {"weights", adaptor.getWeights(), -1, Elt::F32},
                                              {"experts", adaptor.getExperts(), -1, Elt::Id}})))
    return failure();
  auto x = rankedType(adaptor.getInput()), weights = rankedType(adaptor.getWeights()),
       ids = rankedType(adaptor.getExperts());
  if (weights.getShape() != ids.getShape())
    return shapeError<ExpertDispatchOp>(loc, fqn, "weights ", weights, " and experts ", ids,
                                        " must have the same shape");
  if (ids.getShape().drop_back() != x.getShape().drop_back())
    return shapeError<ExpertDispatchOp>(loc, fqn, "experts ", ids,
                                        " must have the leading shape of input ", x);
  int64_t groups = int64_t(adaptor.getGroups()), chunks = int64_t(adaptor.getChunks()),
          capacity = int64_t(adaptor.getCapacity()),
          numExperts = int64_t(adaptor.getNumExperts());
  if (failed(checkChunks<ExpertDispatchOp>(loc, fqn, ids, chunks)))
    return failure();
  if (groups < 1 || numExperts < 1 || numExperts % groups)
    return shapeError<ExpertDispatchOp>(loc, fqn, "groups = ", groups,
                                        " must divide num_experts = ", numExperts);
  if (ids.getShape().back() > numExperts)
    return shapeError<ExpertDispatchOp>(loc, fqn, "k = ", ids.getShape().back(),
                                        " experts per token exceeds num_experts = ",
                                        numExperts);
  if (capacity < 1)
    return shapeError<ExpertDispatchOp>(loc, fqn, "capacity must be positive, got ", capacity);
  SmallVector<int64_t> buffer =
      bufferShape(groups, chunks, capacity, x.getShape().back());
  types.push_back(withShape(x, buffer));
  types.push_back(RankedTensorType::get(withLast(buffer, 1), Float32Type::get(context)));
  types.push_back(RankedTensorType::get(withLast(buffer, 1), IntegerType::get(context, 64)));
  types.push_back(RankedTensorType::get(ids.getShape(), IntegerType::get(context, 64)));
  return success();
}

// Data movement only: no arithmetic.
double ExpertDispatchOp::getFlops() { return 0; }

//===----------------------------------------------------------------------===//
// ExpertCombineOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertCombineOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<ExpertCombineOp>(loc, fqn,
                                            {{"slots", adaptor.getSlots(), -1, Elt::I64},
                                             {"rows", adaptor.getRows(), 3, Elt::Float}})))
    return failure();
  auto slots = rankedType(adaptor.getSlots()), rows = rankedType(adaptor.getRows());
  int64_t chunks = int64_t(adaptor.getChunks());
  if (failed(checkChunks<ExpertCombineOp>(loc, fqn, slots, chunks)) ||
      failed(capacityOf<ExpertCombineOp>(loc, fqn, "rows", rows, chunks)))
    return failure();
  types.push_back(withShape(rows, withLast(slots.getShape(), rows.getDimSize(2))));
  return success();
}

// One add per kept pair and feature.
double ExpertCombineOp::getFlops() {
  return double(getSlots().getType().getNumElements()) * getRows().getType().getDimSize(2);
}

//===----------------------------------------------------------------------===//
// ExpertDispatchBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertDispatchBackwardOp::inferReturnTypes(MLIRContext *context,
                                                         std::optional<Location> loc,
                                                         Adaptor adaptor,
                                                         SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<ExpertDispatchBackwardOp>(
          loc, fqn,
          {{"slots", adaptor.getSlots(), -1, Elt::I64},
           {"rows_grad", adaptor.getRowsGrad(), 3, Elt::Float},
           {"row_weights_grad", adaptor.getRowWeightsGrad(), 3, Elt::F32}})))
    return failure();
  auto slots = rankedType(adaptor.getSlots()), rows = rankedType(adaptor.getRowsGrad()),
       rowWeights = rankedType(adaptor.getRowWeightsGrad());
  int64_t chunks = int64_t(adaptor.getChunks());
  if (failed(checkChunks<ExpertDispatchBackwardOp>(loc, fqn, slots, chunks)) ||
      failed(capacityOf<ExpertDispatchBackwardOp>(loc, fqn, "rows_grad", rows, chunks)))
    return failure();
  if (rowWeights.getShape() != ArrayRef<int64_t>(withLast(rows.getShape(), 1)))
    return shapeError<ExpertDispatchBackwardOp>(loc, fqn, "row_weights_grad ", rowWeights,
                                                " must be rows_grad's shape ", rows,
                                                " with a last dimension of 1");
  types.push_back(withShape(rows, withLast(slots.getShape(), rows.getDimSize(2))));
  types.push_back(RankedTensorType::get(slots.getShape(), Float32Type::get(context)));
  return success();
}

// One add per kept pair and feature.
double ExpertDispatchBackwardOp::getFlops() {
  return double(getSlots().getType().getNumElements()) *
         getRowsGrad().getType().getDimSize(2);
}

//===----------------------------------------------------------------------===//
// ExpertCombineBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertCombineBackwardOp::inferReturnTypes(MLIRContext *,
                                                        std::optional<Location> loc,
                                                        Adaptor adaptor,
                                                        SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<ExpertCombineBackwardOp>(
          loc, fqn,
          {{"result_grad", adaptor.getResultGrad(), -1, Elt::Float},
           {"slots", adaptor.getSlots(), -1, Elt::I64}})))
    return failure();
  auto grad = rankedType(adaptor.getResultGrad()), slots = rankedType(adaptor.getSlots());
  if (slots.getShape().drop_back() != grad.getShape().drop_back())
    return shapeError<ExpertCombineBackwardOp>(loc, fqn, "slots ", slots,
                                               " must have the leading shape of result_grad ",
                                               grad);
  int64_t groups = int64_t(adaptor.getGroups()), chunks = int64_t(adaptor.getChunks()),
          capacity = int64_t(adaptor.getCapacity());
  if (failed(checkChunks<ExpertCombineBackwardOp>(loc, fqn, slots, chunks)))
    return failure();
  if (groups < 1 || capacity < 1)
    return shapeError<ExpertCombineBackwardOp>(loc, fqn, "groups and capacity must be "
                                                         "positive, got ",
                                               groups, " and ", capacity);
  types.push_back(withShape(grad, bufferShape(groups, chunks, capacity, grad.getShape().back())));
  return success();
}

// Data movement only.
double ExpertCombineBackwardOp::getFlops() { return 0; }
