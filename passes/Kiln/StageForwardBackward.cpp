//===- StageForwardBackward.cpp - A stage's forward and backward apart ----===//
//
// kiln-stage-forward-backward: a pipeline schedule runs a stage's forward of
// a microbatch long before its backward, so each differentiated stage is cut
// in two functions; the activations the backward reads travel from one to
// the other as residuals.
//
//===----------------------------------------------------------------------===//

#include "DifferentiatedStages.h"
#include "ParameterOps.h"

#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/Recomputed.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_STAGEFORWARDBACKWARD
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// A function after `after` named `name`, with `args` (and their
/// attributes) as arguments, `ops` cloned in order, returning `results`.
func::FuncOp outline(OpBuilder &b, func::FuncOp after, const Twine &name, ArrayRef<Value> args,
                     ArrayRef<DictionaryAttr> argAttrs, ArrayRef<Operation *> ops,
                     ArrayRef<Value> results, ArrayRef<DictionaryAttr> resultAttrs) {
  b.setInsertionPointAfter(after);
  auto fn = func::FuncOp::create(
      b, after.getLoc(), name.str(),
      b.getFunctionType(ValueRange(args).getTypes(), ValueRange(results).getTypes()));
  fn.setAllArgAttrs(argAttrs);
  fn.setAllResultAttrs(resultAttrs);
  if (auto stage = after->getAttr(kStageAttr))
    fn->setAttr(kStageAttr, stage);
  Block *entry = fn.addEntryBlock();
  IRMapping map;
  map.map(args, entry->getArguments());
  OpBuilder inner = OpBuilder::atBlockEnd(entry);
  for (Operation *op : ops)
    inner.clone(*op, map);
  SmallVector<Value> mapped;
  for (Value v : results)
    mapped.push_back(map.lookupOrDefault(v));
  func::ReturnOp::create(inner, after.getLoc(), mapped);
  return fn;
}

/// Replaces `grad`, a stage differentiated in one function whose ops
/// `forward` are the stage's own (all others its reverse mode, which alone
/// reads the kiln.cotangent arguments), by `@<stageName>_forward` and
/// `@<stageName>_backward` after it (Passes.td); its first `numOwnResults`
/// results are the forward's.
void splitStageForwardBackward(func::FuncOp grad, ArrayRef<Operation *> forward,
                               unsigned numOwnResults, StringRef stageName) {
  OpBuilder b(grad.getContext());
  Block &body = grad.getBody().front();
  Operation *ret = body.getTerminator();
  llvm::DenseSet<Operation *> isForward(forward.begin(), forward.end());
  SmallVector<Operation *> backward;
  for (Operation &op : body.without_terminator())
    if (!isForward.contains(&op))
      backward.push_back(&op);

  // Values of parameters alone (a weight's bf16 cast) are computed again in
  // the backward rather than kept for every microbatch in flight.
  llvm::DenseSet<Operation *> ofParameters = opsOfParametersAlone(grad, forward);

  // What the backward reads from the forward ops and from the arguments.
  llvm::SetVector<Value> residuals, backwardArgs;
  llvm::SetVector<Operation *> recomputed;
  std::function<void(Value)> read = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (!grad.getArgAttr(arg.getArgNumber(), kCotangentAttr))
        backwardArgs.insert(v);
    } else if (ofParameters.contains(def)) {
      if (recomputed.insert(def))
        for (Value operand : def->getOperands())
          read(operand);
    } else if (isForward.contains(def)) {
      residuals.insert(v);
    }
  };
  for (Operation *op : backward)
    for (Value v : op->getOperands())
      read(v);
  for (Value v : ret->getOperands().drop_front(numOwnResults))
    read(v);
  SmallVector<Operation *> backwardOps;
  for (Operation *op : forward)
    if (recomputed.contains(op))
      backwardOps.push_back(op);
  llvm::append_range(backwardOps, backward);

  // kiln.saved says what the forward keeps for the backward: the residuals
  // kiln ops make. A collective's (TP's all-reduce of a rowwise output) is
  // kept too; the forward's kiln.residual results list every one.
  for (Operation *op : forward) {
    if (!isa<KilnDialect>(op->getDialect()))
      continue;
    SmallVector<int64_t> saved;
    for (OpResult result : op->getResults())
      if (residuals.contains(result))
        saved.push_back(result.getResultNumber());
    if (saved.empty())
      op->removeAttr(kSavedAttr);
    else
      op->setAttr(kSavedAttr, b.getDenseI64ArrayAttr(saved));
  }

  auto tag = [&](StringRef name, int64_t i) {
    return b.getDictionaryAttr(b.getNamedAttr(name, b.getI64IntegerAttr(i)));
  };
  auto argAttrsOf = [&](Value v) {
    return grad.getArgAttrDict(cast<BlockArgument>(v).getArgNumber());
  };
  auto resultAttrsOf = [&](unsigned i) { return grad.getResultAttrDict(i); };

  // Forward: every argument but the cotangents.
  SmallVector<Value> fArgs, fResults;
  SmallVector<DictionaryAttr> fArgAttrs, fResultAttrs;
  for (BlockArgument arg : body.getArguments())
    if (!grad.getArgAttr(arg.getArgNumber(), kCotangentAttr)) {
      fArgs.push_back(arg);
      fArgAttrs.push_back(argAttrsOf(arg));
    }
  for (unsigned i = 0; i < numOwnResults; ++i) {
    fResults.push_back(ret->getOperand(i));
    fResultAttrs.push_back(resultAttrsOf(i));
  }
  for (auto [i, v] : llvm::enumerate(residuals)) {
    fResults.push_back(v);
    fResultAttrs.push_back(tag(kResidualAttr, i));
  }
  func::FuncOp fwd =
      outline(b, grad, stageName + "_forward", fArgs, fArgAttrs, forward, fResults, fResultAttrs);

  // Backward: the residuals, the arguments it reads, the cotangents.
  SmallVector<Value> bArgs, bResults;
  SmallVector<DictionaryAttr> bArgAttrs, bResultAttrs;
  for (auto [i, v] : llvm::enumerate(residuals)) {
    bArgs.push_back(v);
    bArgAttrs.push_back(tag(kResidualAttr, i));
  }
  for (BlockArgument arg : body.getArguments())
    if (backwardArgs.contains(arg) || grad.getArgAttr(arg.getArgNumber(), kCotangentAttr)) {
      bArgs.push_back(arg);
      bArgAttrs.push_back(argAttrsOf(arg));
    }
  for (unsigned i = numOwnResults; i < ret->getNumOperands(); ++i) {
    bResults.push_back(ret->getOperand(i));
    bResultAttrs.push_back(resultAttrsOf(i));
  }
  func::FuncOp bwd = outline(b, fwd, stageName + "_backward", bArgs, bArgAttrs, backwardOps,
                             bResults, bResultAttrs);
  bwd.walk([](Operation *op) { op->removeAttr(kSavedAttr); });
  grad.erase();
}

struct StageForwardBackwardPass
    : public kiln::impl::StageForwardBackwardBase<StageForwardBackwardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> grads = differentiatedStages(module);
    if (grads.empty()) {
      module.emitError() << "kiln-stage-forward-backward: no differentiated stage (a '"
                         << kStageAttr << "' function named ..._grad: run kiln-autodiff "
                         << "pipeline-stages first)";
      return signalPassFailure();
    }
    for (func::FuncOp grad : grads) {
      // Its own results come first: what it sends, or the loss and metrics.
      unsigned own = 0;
      while (own < grad.getNumResults() &&
             (grad.getResultAttr(own, kTransferAttr) || grad.getResultAttr(own, kOutputAttr)))
        ++own;
      if (own == 0) {
        grad.emitError() << "kiln-stage-forward-backward: @" << grad.getSymName() << " returns no '"
                         << kTransferAttr << "' or '" << kOutputAttr
                         << "' result first, so it has no forward";
        return signalPassFailure();
      }
      // The forward: the ops those results depend on (never a recomputed
      // copy, which only the backward reads), in program order.
      llvm::DenseSet<Operation *> needed;
      Operation *ret = grad.getBody().front().getTerminator();
      SmallVector<Value> worklist(ret->getOperands().take_front(own));
      while (!worklist.empty()) {
        Operation *def = worklist.pop_back_val().getDefiningOp();
        if (def && needed.insert(def).second)
          llvm::append_range(worklist, def->getOperands());
      }
      SmallVector<Operation *> forward;
      for (Operation &op : grad.getBody().front().without_terminator())
        if (needed.contains(&op) && !op.hasAttr(kRecomputedAttr))
          forward.push_back(&op);
      splitStageForwardBackward(grad, forward, own, grad.getSymName().drop_back(5));
    }
  }
};

} // namespace
