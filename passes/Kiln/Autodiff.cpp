//===- Autodiff.cpp - Reverse-mode differentiation of a loss --------------===//

#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Passes/Kiln/Passes.h"
#include "kiln/Passes/Kiln/ReverseMode.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_AUTODIFF
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

std::string fqnOf(Operation *op) {
  auto fqn = op->getAttrOfType<StringAttr>("fqn");
  return fqn ? fqn.str() : op->getName().getStringRef().str();
}

/// The module a value belongs to (kiln::owningModule), else its defining
/// op's name, or "argument".
std::string ownerOf(Value v) {
  StringRef module = owningModule(v);
  if (!module.empty())
    return module.str();
  return v.getDefiningOp() ? fqnOf(v.getDefiningOp()) : "argument";
}

/// Cotangents of the values of one function, summed over all their uses.
class Cotangents {
public:
  explicit Cotangents(OpBuilder &b) : b(b) {}

  Value lookup(Value v) const { return grads.lookup(v); }

  /// Adds `grad` into v's cotangent; a sum is named after the module v
  /// belongs to (`<owner>.grad_accum`), where `from` is the op whose VJP
  /// produced this contribution.
  void accumulate(Value v, Value grad, Location from) {
    Value &slot = grads[v];
    slot = slot ? AddOp::create(b, from, slot, grad,
                                b.getStringAttr(ownerOf(v) + ".grad_accum"))
                      .getResult()
                : grad;
  }

private:
  OpBuilder &b;
  DenseMap<Value, Value> grads;
};

} // namespace

FailureOr<SmallVector<Value>> kiln::buildReverseMode(OpBuilder &b, ArrayRef<Operation *> forward,
                                                     ArrayRef<std::pair<Value, Value>> seeds,
                                                     ValueRange wrt) {
  Cotangents cotangents(b);
  for (auto [value, seed] : seeds)
    cotangents.accumulate(value, seed, value.getLoc());
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(cotangents.lookup(result));
      any |= resultGrads.back() != nullptr;
    }
    if (!any)
      continue;
    auto vjp = dyn_cast<VjpOpInterface>(op);
    if (!vjp)
      return op->emitOpError() << "(fqn '" << fqnOf(op)
                               << "'): no VJP, cannot differentiate through it";
    SmallVector<Value> operandGrads;
    if (failed(vjp.buildVjp(b, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError() << "(fqn '" << fqnOf(op) << "'): its VJP built "
                               << operandGrads.size() << " cotangents for "
                               << op->getNumOperands() << " operands";
    for (auto [operand, operandGrad] : llvm::zip(op->getOperands(), operandGrads))
      if (operandGrad)
        cotangents.accumulate(operand, operandGrad, op->getLoc());
  }
  SmallVector<Value> grads;
  for (Value v : wrt)
    grads.push_back(cotangents.lookup(v));
  return grads;
}

namespace {

struct AutodiffPass : public kiln::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (pipelineStages)
      return differentiateStages(module);
    auto loss = module.lookupSymbol<func::FuncOp>(funcName);
    if (!loss) {
      module.emitError() << "kiln-autodiff: no function @" << funcName << " to differentiate";
      return signalPassFailure();
    }
    if (module.lookupSymbol(gradFuncName)) {
      module.emitError() << "kiln-autodiff: @" << gradFuncName << " already exists";
      return signalPassFailure();
    }
    if (failed(checkLossResults(loss)) || failed(differentiate(loss, gradFuncName, true)))
      return signalPassFailure();
  }

  /// Each stage of kiln-pipeline-split, the last from its loss, the others
  /// from their transfers' cotangents.
  void differentiateStages(ModuleOp module) {
    SmallVector<func::FuncOp> stages;
    int64_t last = -1;
    for (auto fn : module.getOps<func::FuncOp>())
      if (auto stage = fn->getAttrOfType<IntegerAttr>(kStageAttr)) {
        stages.push_back(fn);
        last = std::max(last, stage.getInt());
      }
    if (stages.empty()) {
      module.emitError() << "kiln-autodiff: pipeline-stages, but no function is tagged '"
                         << kStageAttr << "' (kiln-pipeline-split makes them)";
      return signalPassFailure();
    }
    for (func::FuncOp fn : stages) {
      bool isLast = fn->getAttrOfType<IntegerAttr>(kStageAttr).getInt() == last;
      if (!isLast)
        for (unsigned i = 0; i < fn.getNumResults(); ++i)
          if (!fn.getResultAttr(i, kTransferAttr)) {
            fn.emitError() << "kiln-autodiff: result #" << i << " of stage @" << fn.getSymName()
                           << " is not a transfer ('" << kTransferAttr
                           << "'); only the last stage returns the loss";
            return signalPassFailure();
          }
      if ((isLast && failed(checkLossResults(fn))) ||
          failed(differentiate(fn, (fn.getSymName() + "_grad").str(), isLast)))
        return signalPassFailure();
    }
  }

  /// The loss comes first; any further results are metrics computed beside
  /// it (tagged kiln.output, e.g. a MoE model's aux_loss), not differentiated.
  LogicalResult checkLossResults(func::FuncOp loss) {
    auto resultTypes = loss.getFunctionType().getResults();
    auto isScalar = [](Type type) {
      auto scalar = dyn_cast<RankedTensorType>(type);
      return scalar && scalar.getRank() == 0 && scalar.getElementType().isF32();
    };
    if (resultTypes.empty() || !llvm::all_of(resultTypes, isScalar) ||
        metricOutputs(loss).size() + 1 != resultTypes.size())
      return loss.emitError() << "kiln-autodiff: @" << loss.getSymName()
                              << " must return the loss as an f32 scalar (tensor<f32>), then "
                                 "only f32 scalar metrics tagged '"
                              << kOutputAttr << "'";
    return success();
  }

  /// Clones `fn` as `gradName` with its reverse mode appended: from the loss
  /// (seeded with 1) when `fromLoss`, else from a cotangent argument per
  /// transfer it returns.
  LogicalResult differentiate(func::FuncOp fn, StringRef gradName, bool fromLoss) {
    SmallVector<Signature::Slot> metrics;
    if (fromLoss)
      metrics = metricOutputs(fn);
    OpBuilder b(fn);
    b.setInsertionPointAfter(fn);
    auto grad = cast<func::FuncOp>(b.clone(*fn));
    grad.setSymName(gradName);
    Block &body = grad.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      forward.push_back(&op);

    b.setInsertionPoint(ret);
    SmallVector<std::pair<Value, Value>> seeds;
    SmallVector<Value> results;
    SmallVector<Attribute> resultAttrs;
    if (fromLoss) {
      Value lossValue = ret.getOperand(0);
      auto seed = ConstantOp::create(
          b, lossValue.getLoc(),
          SplatElementsAttr::get(cast<ShapedType>(lossValue.getType()), b.getF32FloatAttr(1.0f)),
          b.getStringAttr("loss.seed_grad"));
      seeds.push_back({lossValue, seed});
      results.push_back(lossValue);
      resultAttrs.push_back(
          b.getDictionaryAttr(b.getNamedAttr(kOutputAttr, b.getStringAttr(kLossOutput))));
      for (const Signature::Slot &metric : metrics) {
        results.push_back(ret.getOperand(metric.index));
        resultAttrs.push_back(
            b.getDictionaryAttr(b.getNamedAttr(kOutputAttr, b.getStringAttr(metric.name))));
      }
    } else {
      for (auto [i, sent] : llvm::enumerate(ret.getOperands())) {
        Attribute number = fn.getResultAttr(i, kTransferAttr);
        unsigned index = grad.getNumArguments();
        (void)grad.insertArgument(index, sent.getType(),
                                  b.getDictionaryAttr(b.getNamedAttr(kCotangentAttr, number)),
                                  sent.getLoc());
        seeds.push_back({sent, grad.getArgument(index)});
        results.push_back(sent);
        resultAttrs.push_back(fn.getResultAttrDict(i));
      }
    }
    // Gradients of the parameters, then cotangents of the float transfers
    // received, in argument order.
    SmallVector<Value> params, received;
    for (BlockArgument arg : body.getArguments()) {
      if (grad.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttr))
        params.push_back(arg);
      else if (grad.getArgAttr(arg.getArgNumber(), kTransferAttr) &&
               isa<FloatType>(getElementTypeOrSelf(arg.getType())))
        received.push_back(arg);
    }
    SmallVector<Value> wrt(params);
    llvm::append_range(wrt, received);
    FailureOr<SmallVector<Value>> grads = buildReverseMode(b, forward, seeds, wrt);
    if (failed(grads))
      return failure();

    for (auto [arg, g] : llvm::zip(params, ArrayRef(*grads).take_front(params.size()))) {
      auto key = grad.getArgAttrOfType<StringAttr>(cast<BlockArgument>(arg).getArgNumber(),
                                                   kParamAttr);
      if (!g)
        return grad.emitError() << "kiln-autodiff: parameter '" << key.getValue()
                                << "' does not influence the loss";
      results.push_back(g);
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(kGradAttr, key)));
    }
    for (auto [arg, cotangent] : llvm::zip(received, ArrayRef(*grads).drop_front(params.size()))) {
      Attribute number = grad.getArgAttr(cast<BlockArgument>(arg).getArgNumber(), kTransferAttr);
      Value g = cotangent;
      if (!g)
        g = ConstantOp::create(
            b, arg.getLoc(),
            SplatElementsAttr::get(cast<ShapedType>(arg.getType()),
                                   b.getFloatAttr(getElementTypeOrSelf(arg.getType()), 0.0)),
            b.getStringAttr("pipeline.zero_grad"));
      results.push_back(g);
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(kCotangentAttr, number)));
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    grad.setFunctionType(
        b.getFunctionType(grad.getArgumentTypes(), ValueRange(results).getTypes()));
    grad.setAllResultAttrs(resultAttrs);
    markSavedActivations(forward);
    return success();
  }

  /// Tags each forward op with the results that backward ops read.
  void markSavedActivations(ArrayRef<Operation *> forward) {
    llvm::DenseSet<Operation *> isForward(forward.begin(), forward.end());
    for (Operation *op : forward) {
      SmallVector<int64_t> saved;
      for (OpResult result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !isForward.contains(user) && !isa<func::ReturnOp>(user);
            }))
          saved.push_back(result.getResultNumber());
      if (!saved.empty())
        op->setAttr(kSavedAttr, DenseI64ArrayAttr::get(op->getContext(), saved));

    }
  }
};

} // namespace
