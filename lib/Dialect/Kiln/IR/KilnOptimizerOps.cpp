//===- KilnOptimizerOps.cpp - Shape rules and costs of optimizer ops ------===//

#include "ShapeRules.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::detail;

namespace {
Type scalarF32(MLIRContext *context) {
  return RankedTensorType::get({}, Float32Type::get(context));
}
} // namespace

//===----------------------------------------------------------------------===//
// GlobalNormOp
//===----------------------------------------------------------------------===//

LogicalResult GlobalNormOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (adaptor.getTensors().empty())
    return shapeError<GlobalNormOp>(loc, adaptor.getFqn(), "needs at least one tensor");
  for (Value t : adaptor.getTensors()) {
    auto type = rankedType(t);
    if (!type || !type.hasStaticShape() || !isComputeFloat(type.getElementType()))
      return shapeError<GlobalNormOp>(loc, adaptor.getFqn(),
                                      "operands must be static float tensors, got ",
                                      t.getType());
  }
  types.push_back(scalarF32(context));
  return success();
}
double GlobalNormOp::getFlops() {
  double elements = 0;
  for (Type type : getTensors().getTypes())
    elements += cast<RankedTensorType>(type).getNumElements();
  return 2 * elements;
}

//===----------------------------------------------------------------------===//
// ClipCoefOp
//===----------------------------------------------------------------------===//

LogicalResult ClipCoefOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<ClipCoefOp>(loc, fqn, {{"norm", adaptor.getNorm(), 0, Elt::F32}})))
    return failure();
  if (!(adaptor.getMaxNorm().convertToDouble() > 0))
    return shapeError<ClipCoefOp>(loc, fqn, "max_norm must be positive");
  types.push_back(scalarF32(context));
  return success();
}
double ClipCoefOp::getFlops() { return 3; }

//===----------------------------------------------------------------------===//
// LrScheduleOp
//===----------------------------------------------------------------------===//

LogicalResult LrScheduleOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkOperands<LrScheduleOp>(loc, adaptor.getFqn(),
                                         {{"step", adaptor.getStep(), 0, Elt::I64}})))
    return failure();
  types.push_back(scalarF32(context));
  return success();
}
LogicalResult LrScheduleOp::verify() {
  auto error = [&]() {
    return emitOpError() << "(fqn '" << getFqn() << "'): ";
  };
  if (!(getLr().convertToDouble() > 0))
    return error() << "lr must be positive";
  if (int64_t(getWarmupSteps()) < 0 || int64_t(getStableSteps()) < 0 ||
      int64_t(getDecaySteps()) < 0)
    return error() << "warmup_steps, stable_steps and decay_steps must be non-negative";
  double minLr = getMinLrFactor().convertToDouble();
  if (!(minLr >= 0 && minLr <= 1))
    return error() << "min_lr_factor must be in [0, 1]";
  return success();
}
double LrScheduleOp::getFlops() { return 0; }

//===----------------------------------------------------------------------===//
// AdamWOp
//===----------------------------------------------------------------------===//

LogicalResult AdamWOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<AdamWOp>(loc, fqn,
                                    {{"step", adaptor.getStep(), 0, Elt::I64},
                                     {"lr", adaptor.getLr(), 0, Elt::F32},
                                     {"grad_scale", adaptor.getGradScale(), 0, Elt::F32}})))
    return failure();
  Type param = adaptor.getParam().getType();
  for (auto [name, value] : {std::pair<StringRef, Value>{"grad", adaptor.getGrad()},
                             {"exp_avg", adaptor.getExpAvg()},
                             {"exp_avg_sq", adaptor.getExpAvgSq()}}) {
    SmallVector<Type> scratch;
    if (failed(inferSameType<AdamWOp>(loc, fqn, "param", adaptor.getParam(), name, value,
                                      scratch)))
      return failure();
  }
  types.append({param, param, param});
  return success();
}
double AdamWOp::getFlops() { return 12.0 * getParam().getType().getNumElements(); }
// The new parameter and moments overwrite the old ones.
std::optional<unsigned> AdamWOp::getTiedOperand(unsigned result) {
  return std::array<unsigned, 3>{0, 2, 3}[result];
}

double SqrtOp::getFlops() { return double(getInput().getType().getNumElements()); }

//===----------------------------------------------------------------------===//
// NextStepOp
//===----------------------------------------------------------------------===//

LogicalResult NextStepOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkOperands<NextStepOp>(loc, adaptor.getFqn(),
                                       {{"step", adaptor.getStep(), 0, Elt::I64}})))
    return failure();
  types.push_back(adaptor.getStep().getType());
  return success();
}
double NextStepOp::getFlops() { return 0; }
