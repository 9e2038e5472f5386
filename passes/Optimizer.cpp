//===- Optimizer.cpp - AdamW, clipping and LR schedule: @train_step -------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_OPTIMIZER
#include "passes/Passes.h.inc"
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
    return success();
  }

  LogicalResult build(func::FuncOp grad) {
    // Parameters of @grad and, by HF key, the result index of their gradient.
    SmallVector<unsigned> paramArgs;
    SmallVector<StringAttr> keys;
    DenseMap<Attribute, unsigned> gradResult;
    for (unsigned i = 0, e = grad.getNumResults(); i < e; ++i)
      if (auto key = grad.getResultAttrOfType<StringAttr>(i, kGradAttr))
        gradResult[key] = i;
    int tokensArg = -1;
    for (unsigned i = 0, e = grad.getNumArguments(); i < e; ++i) {
      if (auto key = grad.getArgAttrOfType<StringAttr>(i, kParamAttr)) {
        if (!gradResult.count(key))
          return grad.emitError() << "kiln-optimizer: no gradient result for '"
                                  << key.getValue() << "'";
        paramArgs.push_back(i);
        keys.push_back(key);
      } else if (grad.getArgAttr(i, kInputAttr)) {
        if (tokensArg >= 0)
          return grad.emitError() << "kiln-optimizer: expected exactly one data input";
        tokensArg = i;
      }
    }
    if (tokensArg < 0)
      return grad.emitError() << "kiln-optimizer: @" << gradFuncName
                              << " has no argument tagged kiln.input";

    OpBuilder b(grad);
    auto stepType = RankedTensorType::get({}, b.getI64Type());
    // Signature: params..., step, exp_avg..., exp_avg_sq..., tokens.
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    auto tag = [&](StringRef name, StringRef value) {
      return b.getDictionaryAttr(b.getNamedAttr(name, b.getStringAttr(value)));
    };
    for (auto [arg, key] : llvm::zip(paramArgs, keys)) {
      argTypes.push_back(grad.getArgumentTypes()[arg]);
      argAttrs.push_back(tag(kParamAttr, key));
    }
    argTypes.push_back(stepType);
    argAttrs.push_back(tag(kStateAttr, "step"));
    for (StringRef moment : {"exp_avg.", "exp_avg_sq."})
      for (auto [arg, key] : llvm::zip(paramArgs, keys)) {
        argTypes.push_back(grad.getArgumentTypes()[arg]);
        argAttrs.push_back(tag(kStateAttr, (moment + key.getValue()).str()));
      }
    argTypes.push_back(grad.getArgumentTypes()[tokensArg]);
    argAttrs.push_back(grad.getArgAttrDict(tokensArg));

    b.setInsertionPointAfter(grad);
    auto train = func::FuncOp::create(b, grad.getLoc(), trainFuncName,
                                      b.getFunctionType(argTypes, {}));
    train.setAllArgAttrs(argAttrs);
    Block *entry = train.addEntryBlock();
    size_t n = paramArgs.size();
    auto param = [&](size_t i) { return entry->getArgument(i); };
    Value step = entry->getArgument(n);
    auto expAvg = [&](size_t i) { return entry->getArgument(n + 1 + i); };
    auto expAvgSq = [&](size_t i) { return entry->getArgument(2 * n + 1 + i); };

    // Inline the loss and gradients.
    IRMapping mapping;
    for (size_t i = 0; i < n; ++i)
      mapping.map(grad.getArgument(paramArgs[i]), param(i));
    mapping.map(grad.getArgument(tokensArg), entry->getArgument(3 * n + 1));
    b.setInsertionPointToStart(entry);
    for (Operation &op : grad.getBody().front().without_terminator())
      b.clone(op, mapping);
    auto gradReturn = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    Value loss = mapping.lookup(gradReturn.getOperand(0));
    SmallVector<Value> grads;
    for (StringAttr key : keys)
      grads.push_back(mapping.lookup(gradReturn.getOperand(gradResult[key])));

    // Clip by total norm, schedule the rate, update every parameter.
    Location loc = grad.getLoc();
    Value norm = GlobalNormOp::create(b, loc, grads, b.getStringAttr("optimizer.grad_norm"));
    Value coef = ClipCoefOp::create(b, loc, norm, b.getF64FloatAttr(maxNorm),
                                    b.getStringAttr("optimizer.clip_grad_norm"));
    Value rate = LrScheduleOp::create(
        b, loc, step, b.getF64FloatAttr(lr), b.getI64IntegerAttr(warmupSteps),
        b.getI64IntegerAttr(stableSteps), b.getI64IntegerAttr(decaySteps),
        b.getStringAttr(decayType), b.getF64FloatAttr(minLrFactor),
        b.getStringAttr("lr_scheduler"));
    SmallVector<Value> newParams, newExpAvg, newExpAvgSq;
    for (size_t i = 0; i < n; ++i) {
      auto update = AdamWOp::create(
          b, loc, param(i), grads[i], expAvg(i), expAvgSq(i), step, rate, coef,
          b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
          b.getF64FloatAttr(weightDecay), b.getStringAttr("optimizer." + keys[i].str()));
      newParams.push_back(update.getParamOut());
      newExpAvg.push_back(update.getExpAvgOut());
      newExpAvgSq.push_back(update.getExpAvgSqOut());
    }
    Value nextStep = NextStepOp::create(b, loc, step, b.getStringAttr("optimizer.step"));

    SmallVector<Value> results(newParams);
    results.push_back(nextStep);
    llvm::append_range(results, newExpAvg);
    llvm::append_range(results, newExpAvgSq);
    results.append({loss, norm});
    func::ReturnOp::create(b, loc, results);
    train.setFunctionType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
    // Results mirror the state arguments, then loss and grad_norm.
    SmallVector<DictionaryAttr> resultAttrs(argAttrs.begin(), argAttrs.end() - 1);
    resultAttrs.push_back(tag(kInputAttr, "loss"));
    resultAttrs.push_back(tag(kInputAttr, "grad_norm"));
    train.setAllResultAttrs(resultAttrs);
    return success();
  }
};

} // namespace
