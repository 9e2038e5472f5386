//===- KilnOptimizerOps.cpp - Shape rules, costs, kernels of optimizer ops ===//

#include "ShapeRules.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/LrSchedule.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::detail;

namespace {
Type scalarF32(MLIRContext *context) {
  return RankedTensorType::get({}, Float32Type::get(context));
}
Tensor scalarTensor(float value) {
  Tensor t(DType::F32, {});
  *t.mutableData<float>() = value;
  return t;
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
int64_t GlobalNormOp::getFlops() {
  int64_t elements = 0;
  for (Type type : getTensors().getTypes())
    elements += cast<RankedTensorType>(type).getNumElements();
  return 2 * elements;
}
void GlobalNormOp::runOnCpu(MutableArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  out.push_back(kernels::globalNorm(std::vector<Tensor>(in.begin(), in.end())));
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
int64_t ClipCoefOp::getFlops() { return 3; }
void ClipCoefOp::runOnCpu(MutableArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  // torch.nn.utils.clip_grad_norm_: clamp(max_norm / (norm + 1e-6), max=1).
  double norm = *in[0].data<float>();
  double coef = getMaxNorm().convertToDouble() / (norm + 1e-6);
  out.push_back(scalarTensor(float(std::min(1.0, coef))));
}

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
  if (!isKnownDecayType(getDecayType().str()))
    return error() << "decay_type must be linear, sqrt or cosine, got '" << getDecayType()
                   << "'";
  double minLr = getMinLrFactor().convertToDouble();
  if (!(minLr >= 0 && minLr <= 1))
    return error() << "min_lr_factor must be in [0, 1]";
  return success();
}
int64_t LrScheduleOp::getFlops() { return 0; }
void LrScheduleOp::runOnCpu(MutableArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  LrPhases phases{int64_t(getWarmupSteps()), int64_t(getStableSteps()),
                  int64_t(getDecaySteps())};
  double factor = lrFactor(*in[0].data<int64_t>(), phases, getDecayType().str(),
                           getMinLrFactor().convertToDouble());
  out.push_back(scalarTensor(float(getLr().convertToDouble() * factor)));
}

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
int64_t AdamWOp::getFlops() { return 12 * getParam().getType().getNumElements(); }
void AdamWOp::runOnCpu(MutableArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  kernels::AdamWHyper hyper;
  hyper.lr = *in[5].data<float>();
  hyper.beta1 = getBeta1().convertToDouble();
  hyper.beta2 = getBeta2().convertToDouble();
  hyper.eps = getEps().convertToDouble();
  hyper.weightDecay = getWeightDecay().convertToDouble();
  hyper.step = *in[4].data<int64_t>() + 1;
  hyper.gradScale = *in[6].data<float>();
  auto [param, m, v] =
      kernels::adamw(std::move(in[0]), in[1], std::move(in[2]), std::move(in[3]), hyper);
  out.append({param, m, v});
}

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
int64_t NextStepOp::getFlops() { return 0; }
void NextStepOp::runOnCpu(MutableArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  Tensor next(DType::I64, {});
  *next.mutableData<int64_t>() = *in[0].data<int64_t>() + 1;
  out.push_back(next);
}
