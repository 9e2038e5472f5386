//===- Optimizer.cpp - AdamW, clipping and LR schedule: @train_step -------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_OPTIMIZER
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct OptimizerPass : public kiln::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grad = module.lookupSymbol<func::FuncOp>(gradFuncName);
    if (!grad) {
      module.emitError() << "kiln-optimizer: no function @" << gradFuncName
                         << " (run kiln-autodiff first)";
      return signalPassFailure();
    }
    if (module.lookupSymbol(trainFuncName)) {
      module.emitError() << "kiln-optimizer: @" << trainFuncName << " already exists";
      return signalPassFailure();
    }
    if (failed(checkOptions(module)) || failed(build(grad)))
      return signalPassFailure();
  }

  LogicalResult checkOptions(ModuleOp module) {
    auto fail = [&](StringRef what) {
      return module.emitError() << "kiln-optimizer: " << what;
    };
    if (!(lr > 0) || !(eps > 0) || !(maxNorm > 0) || weightDecay < 0)
      return fail("lr, eps and max-norm must be positive and weight-decay non-negative");
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
      return fail("beta1 and beta2 must be in [0, 1)");
    if (!(loadBalanceCoeff >= 0) || !std::isfinite(double(loadBalanceCoeff)))
      return fail("load-balance-coeff must be a finite number >= 0");
    if (microbatches < 1)
      return fail("microbatches must be at least 1, got " + std::to_string(microbatches));
    return success();
  }

  LogicalResult build(func::FuncOp grad) {
    FailureOr<Signature> sig = Signature::get(grad);
    if (failed(sig))
      return failure();
    // Each parameter's gradient result, by its HF key.
    SmallVector<unsigned> gradResults;
    for (const Signature::Slot &p : sig->params()) {
      std::optional<unsigned> g = sig->result(kGradAttr, p.name);
      if (!g)
        return grad.emitError() << "kiln-optimizer: no gradient result of @" << gradFuncName
                                << " is tagged " << kGradAttr << " = \"" << p.name << "\"";
      gradResults.push_back(*g);
    }
    std::optional<unsigned> lossResult = sig->result(kOutputAttr, kLossOutput);
    if (!lossResult)
      return grad.emitError() << "kiln-optimizer: no result of @" << gradFuncName
                              << " is tagged " << kOutputAttr << " = \"" << kLossOutput << "\"";
    if (sig->inputs().empty())
      return grad.emitError() << "kiln-optimizer: @" << gradFuncName
                              << " has no argument tagged " << kInputAttr;

    OpBuilder b(grad);
    auto tag = [&](StringRef name, StringRef value) {
      return b.getDictionaryAttr(b.getNamedAttr(name, b.getStringAttr(value)));
    };
    // Signature: params..., step, exp_avg..., exp_avg_sq..., inputs...; the
    // order is a convention for readers, consumers go by the attributes.
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    auto addArg = [&](Type type, DictionaryAttr attrs) {
      argTypes.push_back(type);
      argAttrs.push_back(attrs);
      return argTypes.size() - 1;
    };
    auto typeOf = [&](const Signature::Slot &slot) { return grad.getArgumentTypes()[slot.index]; };
    SmallVector<size_t> paramArgs, expAvgArgs, expAvgSqArgs;
    for (const Signature::Slot &p : sig->params())
      paramArgs.push_back(addArg(typeOf(p), tag(kParamAttr, p.name)));
    size_t stepArg = addArg(RankedTensorType::get({}, b.getI64Type()), tag(kStateAttr, kStepState));
    for (const Signature::Slot &p : sig->params())
      expAvgArgs.push_back(addArg(typeOf(p), tag(kStateAttr, expAvgName(p.name))));
    for (const Signature::Slot &p : sig->params())
      expAvgSqArgs.push_back(addArg(typeOf(p), tag(kStateAttr, expAvgSqName(p.name))));
    // One copy of the data inputs per microbatch, microbatch-major.
    SmallVector<SmallVector<size_t>> inputArgs(microbatches);
    for (int64_t m = 0; m < microbatches; ++m)
      for (const Signature::Slot &input : sig->inputs()) {
        NamedAttrList attrs(grad.getArgAttrDict(input.index));
        if (microbatches > 1)
          attrs.set(kMicrobatchAttr, b.getI64IntegerAttr(m));
        inputArgs[m].push_back(addArg(typeOf(input), attrs.getDictionary(b.getContext())));
      }
    // Aux-loss-free balancing: an expert bias per router of the forward.
    SmallVector<RouterOp> routers;
    SmallVector<size_t> biasArgs;
    if (loadBalanceCoeff > 0)
      for (auto router : grad.getBody().getOps<RouterOp>()) {
        if (router.getExpertBias())
          return router.emitOpError() << "(fqn '" << router.getFqn()
                                      << "'): already has an expert bias";
        int64_t experts = router.getProbs().getType().getShape().back();
        routers.push_back(router);
        biasArgs.push_back(addArg(RankedTensorType::get({experts}, b.getF32Type()),
                                  tag(kStateAttr, expertBiasName(router.getFqn()))));
      }

    b.setInsertionPointAfter(grad);
    auto train = func::FuncOp::create(b, grad.getLoc(), trainFuncName,
                                      b.getFunctionType(argTypes, {}));
    train.setAllArgAttrs(argAttrs);
    Block *entry = train.addEntryBlock();
    auto arg = [&](size_t index) { return entry->getArgument(index); };

    // Inline the loss and gradients, once per microbatch; each microbatch's
    // loss, metrics and gradients are added to the running sums right away,
    // so its activations and gradients die before the next one starts.
    b.setInsertionPointToStart(entry);
    auto gradReturn = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    SmallVector<Signature::Slot> metrics = metricOutputs(grad);
    IRMapping mapping;
    SmallVector<SmallVector<Value>> routedExperts(routers.size());
    Value loss;
    SmallVector<Value> grads, metricValues;
    for (int64_t m = 0; m < microbatches; ++m) {
      mapping.clear();
      for (auto [p, index] : llvm::zip(sig->params(), paramArgs))
        mapping.map(grad.getArgument(p.index), arg(index));
      for (auto [input, index] : llvm::zip(sig->inputs(), inputArgs[m]))
        mapping.map(grad.getArgument(input.index), arg(index));
      for (Operation &op : grad.getBody().front().without_terminator())
        b.clone(op, mapping);
      // Every microbatch routes with the step's bias; the update counts the
      // load of all of them.
      for (auto [router, index, experts] : llvm::zip(routers, biasArgs, routedExperts)) {
        auto routed = cast<RouterOp>(mapping.lookup(router.getWeights()).getDefiningOp());
        routed.getExpertBiasMutable().assign(arg(index));
        experts.push_back(routed.getExperts());
      }
      auto accumulate = [&](Value &sum, Value value, StringRef fqn, bool gradient) {
        if (m == 0) {
          sum = value;
          return;
        }
        auto add = AddOp::create(b, grad.getLoc(), sum, value,
                                 b.getStringAttr("optimizer.accumulate." + fqn));
        if (gradient)
          add->setAttr(kAccumulateAttr, b.getUnitAttr());
        sum = add;
      };
      accumulate(loss, mapping.lookup(gradReturn.getOperand(*lossResult)), kLossOutput, false);
      grads.resize(gradResults.size());
      for (auto [i, r] : llvm::enumerate(gradResults))
        accumulate(grads[i], mapping.lookup(gradReturn.getOperand(r)), sig->params()[i].name,
                   true);
      metricValues.resize(metrics.size());
      for (auto [value, metric] : llvm::zip(metricValues, metrics))
        accumulate(value, mapping.lookup(gradReturn.getOperand(metric.index)), metric.name, false);
    }
    // Sums of N microbatches' means to the mean over the step (scalars only).
    auto mean = [&](Value sum, StringRef fqn) -> Value {
      if (microbatches == 1)
        return sum;
      return ScaleOp::create(b, grad.getLoc(), sum, b.getF64FloatAttr(1.0 / double(microbatches)),
                             b.getStringAttr("optimizer.mean." + fqn));
    };
    loss = mean(loss, kLossOutput);
    for (auto [value, metric] : llvm::zip(metricValues, metrics))
      value = mean(value, metric.name);
    SmallVector<Value> newBiases;
    for (auto [router, index, experts] : llvm::zip(routers, biasArgs, routedExperts))
      newBiases.push_back(ExpertBiasUpdateOp::create(b, router.getLoc(), arg(index), experts,
                                                     b.getF64FloatAttr(loadBalanceCoeff),
                                                     router.getFqnAttr()));

    // Clip by total norm, schedule the rate, update every parameter. With
    // microbatches the gradients are sums: the norm and the coefficient the
    // update multiplies them by carry the 1/N.
    Location loc = grad.getLoc();
    Value step = arg(stepArg);
    Value norm = mean(GlobalNormOp::create(b, loc, grads, b.getStringAttr("optimizer.grad_norm"),
                                           UnitAttr()),
                      kGradNormOutput);
    Value coef = mean(ClipCoefOp::create(b, loc, norm, b.getF64FloatAttr(maxNorm),
                                         b.getStringAttr("optimizer.clip_grad_norm")),
                      "clip_grad_norm");
    Value rate =
        LrScheduleOp::create(b, loc, step, b.getF64FloatAttr(lr), b.getI64IntegerAttr(warmupSteps),
                             b.getI64IntegerAttr(stableSteps), b.getI64IntegerAttr(decaySteps),
                             DecayTypeAttr::get(b.getContext(), decayType),
                             b.getF64FloatAttr(minLrFactor), b.getStringAttr("lr_scheduler"));
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    SmallVector<Value> newExpAvg, newExpAvgSq;
    for (auto [i, p] : llvm::enumerate(sig->params())) {
      Value param = arg(paramArgs[i]);
      auto update = AdamWOp::create(
          b, loc, param, grads[i], arg(expAvgArgs[i]), arg(expAvgSqArgs[i]), step, rate, coef,
          b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
          b.getF64FloatAttr(weightDecay), b.getStringAttr(moduleOf(param)));
      results.push_back(update.getParamOut());
      resultAttrs.push_back(argAttrs[paramArgs[i]]);
      newExpAvg.push_back(update.getExpAvgOut());
      newExpAvgSq.push_back(update.getExpAvgSqOut());
    }
    results.push_back(NextStepOp::create(b, loc, step, b.getStringAttr("optimizer.step")));
    resultAttrs.push_back(argAttrs[stepArg]);
    for (auto [values, args] : {std::pair{&newExpAvg, &expAvgArgs}, {&newExpAvgSq, &expAvgSqArgs}})
      for (auto [value, index] : llvm::zip(*values, *args)) {
        results.push_back(value);
        resultAttrs.push_back(argAttrs[index]);
      }
    for (auto [bias, index] : llvm::zip(newBiases, biasArgs)) {
      results.push_back(bias);
      resultAttrs.push_back(argAttrs[index]);
    }
    results.append({loss, norm});
    resultAttrs.push_back(tag(kOutputAttr, kLossOutput));
    resultAttrs.push_back(tag(kOutputAttr, kGradNormOutput));
    for (auto [value, metric] : llvm::zip(metricValues, metrics)) {
      results.push_back(value);
      resultAttrs.push_back(tag(kOutputAttr, metric.name));
    }
    func::ReturnOp::create(b, loc, results);
    train.setFunctionType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
    train.setAllResultAttrs(resultAttrs);
    return success();
  }

  /// The module owning a parameter (kiln::owningModule).
  static std::string moduleOf(Value param) {
    StringRef module = owningModule(param);
    return module.empty() ? "optimizer" : module.str();
  }
};

} // namespace
