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

  /// Where @grad-func's gradients (in parameter order) and loss are.
  struct GradOutputs {
    SmallVector<unsigned> grads;
    unsigned loss = 0;
  };

  /// @train-func's arguments: their types and attributes, and where each
  /// kind sits. Order: params..., step, exp_avg..., exp_avg_sq..., the data
  /// inputs once per microbatch, the expert biases; a convention for
  /// readers, consumers go by the attributes.
  struct StepArguments {
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    SmallVector<size_t> params, expAvg, expAvgSq;
    size_t step = 0;
    SmallVector<SmallVector<size_t>> inputs; ///< per microbatch
    SmallVector<RouterOp> routers;           ///< aux-loss-free balancing's
    SmallVector<size_t> biases;              ///< each router's expert bias

    size_t add(Type type, DictionaryAttr attributes) {
      types.push_back(type);
      attrs.push_back(attributes);
      return types.size() - 1;
    }
  };

  /// What the microbatches sum: the loss, each parameter's gradient, the
  /// metrics; and each router's chosen experts, per microbatch.
  struct StepSums {
    Value loss;
    SmallVector<Value> grads, metrics;
    SmallVector<SmallVector<Value>> routedExperts;
  };

  static DictionaryAttr tag(Builder &b, StringRef name, StringRef value) {
    return b.getDictionaryAttr(b.getNamedAttr(name, b.getStringAttr(value)));
  }

  LogicalResult build(func::FuncOp grad) {
    FailureOr<Signature> sig = Signature::get(grad);
    if (failed(sig))
      return failure();
    FailureOr<GradOutputs> outputs = gradOutputs(grad, *sig);
    if (failed(outputs))
      return failure();
    OpBuilder b(grad);
    FailureOr<StepArguments> args = stepArguments(b, grad, *sig);
    if (failed(args))
      return failure();
    b.setInsertionPointAfter(grad);
    auto train =
        func::FuncOp::create(b, grad.getLoc(), trainFuncName, b.getFunctionType(args->types, {}));
    train.setAllArgAttrs(args->attrs);
    b.setInsertionPointToStart(train.addEntryBlock());
    SmallVector<Signature::Slot> metrics = metricOutputs(grad);
    StepSums sums = inlineMicrobatches(b, grad, train, *sig, *outputs, metrics, *args);
    emitUpdate(b, grad.getLoc(), train, *sig, metrics, *args, sums);
    return success();
  }

  /// Each parameter's gradient result and the loss, found by their tags.
  FailureOr<GradOutputs> gradOutputs(func::FuncOp grad, const Signature &sig) {
    GradOutputs outputs;
    for (const Signature::Slot &p : sig.params()) {
      std::optional<unsigned> g = sig.result(kGradAttr, p.name);
      if (!g)
        return grad.emitError() << "kiln-optimizer: no gradient result of @" << gradFuncName
                                << " is tagged " << kGradAttr << " = \"" << p.name << "\"";
      outputs.grads.push_back(*g);
    }
    std::optional<unsigned> loss = sig.result(kOutputAttr, kLossOutput);
    if (!loss)
      return grad.emitError() << "kiln-optimizer: no result of @" << gradFuncName
                              << " is tagged " << kOutputAttr << " = \"" << kLossOutput << "\"";
    if (sig.inputs().empty())
      return grad.emitError() << "kiln-optimizer: @" << gradFuncName
                              << " has no argument tagged " << kInputAttr;
    outputs.loss = *loss;
    return outputs;
  }

  FailureOr<StepArguments> stepArguments(OpBuilder &b, func::FuncOp grad, const Signature &sig) {
    StepArguments args;
    auto typeOf = [&](const Signature::Slot &slot) { return grad.getArgumentTypes()[slot.index]; };
    for (const Signature::Slot &p : sig.params())
      args.params.push_back(args.add(typeOf(p), tag(b, kParamAttr, p.name)));
    args.step = args.add(RankedTensorType::get({}, b.getI64Type()), tag(b, kStateAttr, kStepState));
    for (const Signature::Slot &p : sig.params())
      args.expAvg.push_back(args.add(typeOf(p), tag(b, kStateAttr, expAvgName(p.name))));
    for (const Signature::Slot &p : sig.params())
      args.expAvgSq.push_back(args.add(typeOf(p), tag(b, kStateAttr, expAvgSqName(p.name))));
    // One copy of the data inputs per microbatch, microbatch-major.
    args.inputs.resize(microbatches);
    for (int64_t m = 0; m < microbatches; ++m)
      for (const Signature::Slot &input : sig.inputs()) {
        NamedAttrList attrs(grad.getArgAttrDict(input.index));
        if (microbatches > 1)
          attrs.set(kMicrobatchAttr, b.getI64IntegerAttr(m));
        args.inputs[m].push_back(args.add(typeOf(input), attrs.getDictionary(b.getContext())));
      }
    // Aux-loss-free balancing: an expert bias per router of the forward.
    if (loadBalanceCoeff > 0)
      for (auto router : grad.getBody().getOps<RouterOp>()) {
        if (router.getExpertBias())
          return router.emitOpError() << "(fqn '" << router.getFqn()
                                      << "'): already has an expert bias";
        int64_t experts = router.getProbs().getType().getShape().back();
        args.routers.push_back(router);
        args.biases.push_back(args.add(RankedTensorType::get({experts}, b.getF32Type()),
                                       tag(b, kStateAttr, expertBiasName(router.getFqn()))));
      }
    return args;
  }

  /// The loss and gradients inlined once per microbatch into `train`; each
  /// microbatch's loss, metrics and gradients are added to the running sums
  /// right away, so its activations and gradients die before the next one
  /// starts. Every microbatch routes with the step's expert bias.
  StepSums inlineMicrobatches(OpBuilder &b, func::FuncOp grad, func::FuncOp train,
                              const Signature &sig, const GradOutputs &outputs,
                              ArrayRef<Signature::Slot> metrics, StepArguments &args) {
    auto arg = [&](size_t index) { return train.getArgument(index); };
    auto gradReturn = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    StepSums sums;
    sums.routedExperts.resize(args.routers.size());
    sums.grads.resize(outputs.grads.size());
    sums.metrics.resize(metrics.size());
    IRMapping mapping;
    for (int64_t m = 0; m < microbatches; ++m) {
      mapping.clear();
      for (auto [p, index] : llvm::zip(sig.params(), args.params))
        mapping.map(grad.getArgument(p.index), arg(index));
      for (auto [input, index] : llvm::zip(sig.inputs(), args.inputs[m]))
        mapping.map(grad.getArgument(input.index), arg(index));
      for (Operation &op : grad.getBody().front().without_terminator())
        b.clone(op, mapping);
      for (auto [router, index, experts] :
           llvm::zip(args.routers, args.biases, sums.routedExperts)) {
        auto routed = cast<RouterOp>(mapping.lookup(router.getWeights()).getDefiningOp());
        routed.getExpertBiasMutable().assign(arg(index));
        experts.push_back(routed.getExperts());
      }
      auto accumulate = [&](Value &sum, unsigned result, StringRef fqn, bool gradient) {
        Value value = mapping.lookup(gradReturn.getOperand(result));
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
      accumulate(sums.loss, outputs.loss, kLossOutput, false);
      for (auto [i, r] : llvm::enumerate(outputs.grads))
        accumulate(sums.grads[i], r, sig.params()[i].name, true);
      for (auto [value, metric] : llvm::zip(sums.metrics, metrics))
        accumulate(value, metric.index, metric.name, false);
    }
    return sums;
  }

  /// A sum of N microbatches' means as the mean over the step (scalars only).
  Value mean(OpBuilder &b, Location loc, Value sum, StringRef fqn) {
    if (microbatches == 1)
      return sum;
    return ScaleOp::create(b, loc, sum, b.getF64FloatAttr(1.0 / double(microbatches)),
                           b.getStringAttr("optimizer.mean." + fqn));
  }

  /// The step's update and its results: the loss and metrics as means, the
  /// expert biases moved by the step's load, the gradients clipped by their
  /// total norm, the rate scheduled and every parameter updated. With
  /// microbatches the gradients are sums: the norm and the coefficient the
  /// update multiplies them by carry the 1/N.
  void emitUpdate(OpBuilder &b, Location loc, func::FuncOp train, const Signature &sig,
                  ArrayRef<Signature::Slot> metrics, StepArguments &args, StepSums &sums) {
    auto arg = [&](size_t index) { return train.getArgument(index); };
    Value loss = mean(b, loc, sums.loss, kLossOutput);
    for (auto [value, metric] : llvm::zip(sums.metrics, metrics))
      value = mean(b, loc, value, metric.name);
    SmallVector<Value> newBiases;
    for (auto [router, index, experts] : llvm::zip(args.routers, args.biases, sums.routedExperts))
      newBiases.push_back(ExpertBiasUpdateOp::create(b, router.getLoc(), arg(index), experts,
                                                     b.getF64FloatAttr(loadBalanceCoeff),
                                                     router.getFqnAttr()));
    Value step = arg(args.step);
    Value norm = mean(b, loc,
                      GlobalNormOp::create(b, loc, sums.grads,
                                           b.getStringAttr("optimizer.grad_norm"), UnitAttr()),
                      kGradNormOutput);
    Value coef = mean(b, loc,
                      ClipCoefOp::create(b, loc, norm, b.getF64FloatAttr(maxNorm),
                                         b.getStringAttr("optimizer.clip_grad_norm")),
                      "clip_grad_norm");
    Value rate =
        LrScheduleOp::create(b, loc, step, b.getF64FloatAttr(lr), b.getI64IntegerAttr(warmupSteps),
                             b.getI64IntegerAttr(stableSteps), b.getI64IntegerAttr(decaySteps),
                             DecayTypeAttr::get(b.getContext(), decayType),
                             b.getF64FloatAttr(minLrFactor), b.getStringAttr("lr_scheduler"));
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    auto addResult = [&](Value value, DictionaryAttr attrs) {
      results.push_back(value);
      resultAttrs.push_back(attrs);
    };
    SmallVector<Value> newExpAvg, newExpAvgSq;
    for (auto [i, p] : llvm::enumerate(sig.params())) {
      Value param = arg(args.params[i]);
      auto update = AdamWOp::create(
          b, loc, param, sums.grads[i], arg(args.expAvg[i]), arg(args.expAvgSq[i]), step, rate,
          coef, b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
          b.getF64FloatAttr(weightDecay), b.getStringAttr(moduleOf(param)));
      addResult(update.getParamOut(), args.attrs[args.params[i]]);
      newExpAvg.push_back(update.getExpAvgOut());
      newExpAvgSq.push_back(update.getExpAvgSqOut());
    }
    addResult(NextStepOp::create(b, loc, step, b.getStringAttr("optimizer.step")),
              args.attrs[args.step]);
    for (auto [values, indices] :
         {std::pair{&newExpAvg, &args.expAvg}, {&newExpAvgSq, &args.expAvgSq}})
      for (auto [value, index] : llvm::zip(*values, *indices))
        addResult(value, args.attrs[index]);
    for (auto [bias, index] : llvm::zip(newBiases, args.biases))
      addResult(bias, args.attrs[index]);
    addResult(loss, tag(b, kOutputAttr, kLossOutput));
    addResult(norm, tag(b, kOutputAttr, kGradNormOutput));
    for (auto [value, metric] : llvm::zip(sums.metrics, metrics))
      addResult(value, tag(b, kOutputAttr, metric.name));
    func::ReturnOp::create(b, loc, results);
    train.setFunctionType(b.getFunctionType(args.types, ValueRange(results).getTypes()));
    train.setAllResultAttrs(resultAttrs);
  }

  /// The module owning a parameter (kiln::owningModule).
  static std::string moduleOf(Value param) {
    StringRef module = owningModule(param);
    return module.empty() ? "optimizer" : module.str();
  }
};

} // namespace
