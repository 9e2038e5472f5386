//===- ActivationCheckpoint.cpp - Recompute layers in the backward ---------===//
//
// kiln-autodiff leaves one function: the forward, then the backward, which
// reads forward results (the saved activations) wherever a VJP needs them.
// This pass trades those reads for recomputation: for each checkpointed
// layer it clones the layer's ops the backward depends on right before the
// layer's first backward op, so the forward's copies die in the forward and
// the recomputed ones live only through the layer's backward. The memory
// plan and the executor both follow from the rewritten IR (BufferLiveness).
//
//===----------------------------------------------------------------------===//

#include "DifferentiatedStages.h"
#include "kiln/Config/SelectiveAcOption.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Recomputed.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <map>

namespace kiln {
#define GEN_PASS_DEF_ACTIVATIONCHECKPOINT
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The layer index N of an op whose fqn is `layers.N.*`.
std::optional<int64_t> layerOf(Operation *op) {
  auto fqn = op->getAttrOfType<StringAttr>("fqn");
  if (!fqn || !fqn.getValue().starts_with("layers."))
    return std::nullopt;
  StringRef index = fqn.getValue().drop_front(7).split('.').first;
  int64_t n;
  if (index.getAsInteger(10, n))
    return std::nullopt;
  return n;
}

/// The op an op stands for: a substituted kernel's target, else its name.
StringRef computedOp(Operation *op) {
  if (isa<KernelOp>(op))
    if (auto target = op->getAttrOfType<StringAttr>("target"))
      return target.getValue();
  return op->getName().getStringRef();
}

/// What selective op-level checkpointing saves (torchtitan's save list: mm,
/// SDPA, grouped mm): the results of the expensive ops.
bool isMatmulLike(Operation *op) {
  return llvm::is_contained({"kiln.linear", "kiln.attention", "kiln.grouped_experts"},
                            computedOp(op));
}

/// The forward: the ops computing the function's kiln.output results (the
/// loss and metrics) and kiln.transfer results (a pipeline stage's sends).
/// No backward op feeds those.
llvm::DenseSet<Operation *> forwardOps(func::FuncOp fn) {
  llvm::DenseSet<Operation *> forward;
  SmallVector<Value> worklist;
  Operation *ret = fn.getBody().front().getTerminator();
  for (unsigned r = 0, e = fn.getNumResults(); r < e; ++r)
    if (fn.getResultAttr(r, kOutputAttr) || fn.getResultAttr(r, kTransferAttr))
      worklist.push_back(ret->getOperand(r));
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (def && forward.insert(def).second)
      llvm::append_range(worklist, def->getOperands());
  }
  return forward;
}

struct ActivationCheckpointPass
    : public kiln::impl::ActivationCheckpointBase<ActivationCheckpointPass> {
  using ActivationCheckpointBase::ActivationCheckpointBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(parsePolicy(module)))
      return signalPassFailure();
    if (mode == CheckpointMode::None)
      return;
    SmallVector<func::FuncOp> functions = stagesOrFunction(module, pipelineStages, funcName);
    if (functions.empty()) {
      if (pipelineStages)
        module.emitError() << "kiln-activation-checkpoint: pipeline-stages, but no function is "
                              "a differentiated stage (run kiln-autodiff pipeline-stages first)";
      else
        module.emitError() << "kiln-activation-checkpoint: no function @" << funcName
                           << " (run kiln-autodiff first)";
      return signalPassFailure();
    }
    for (func::FuncOp fn : functions)
      if (failed(checkpoint(fn)))
        return signalPassFailure();
  }

private:
  LogicalResult checkpoint(func::FuncOp fn) {
    // Its forward is what computes the loss and metrics; after kiln-optimizer
    // the gradient norm, an output too, depends on the whole backward.
    for (unsigned a = 0, e = fn.getNumArguments(); a < e; ++a)
      if (fn.getArgAttr(a, kStateAttr))
        return fn.emitError()
               << "kiln-activation-checkpoint runs on the function kiln-autodiff made, "
                  "before kiln-optimizer; @"
               << fn.getSymName() << " holds optimizer state";
    Block &body = fn.getBody().front();
    for (Operation &op : body.without_terminator())
      if (!isa<KilnDialect>(op.getDialect()))
        return op.emitOpError() << "kiln-activation-checkpoint runs on the single-rank @"
                                << fn.getSymName()
                                << " before kiln-shard and kiln-partition; it does not "
                                   "recompute '"
                                << op.getName() << "'";

    forward = forwardOps(fn);
    // Layers in program order; each op of the forward in at most one.
    std::map<int64_t, SmallVector<Operation *>> layers;
    for (Operation &op : body.without_terminator())
      if (forward.contains(&op))
        if (std::optional<int64_t> layer = layerOf(&op); layer && isCheckpointed(*layer))
          layers[*layer].push_back(&op);
    for (auto &[layer, ops] : layers)
      recomputeLayer(ops);
    for (Operation *op : forward)
      markSaved(op);
    return success();
  }

  LogicalResult parsePolicy(ModuleOp module) {
    if (mode != CheckpointMode::Selective)
      return success();
    std::optional<SelectiveAcOption> option = parseSelectiveAcOption(selectiveOption);
    if (!option)
      return module.emitError() << "kiln-activation-checkpoint: selective-option must be 'op' "
                                   "or a positive integer (checkpoint every N-th layer), got '"
                                << selectiveOption << "'";
    selective = *option;
    return success();
  }

  bool isCheckpointed(int64_t layer) const {
    return mode == CheckpointMode::Full || selective.opLevel || (layer + 1) % selective.every == 0;
  }

  bool opLevel() const { return mode == CheckpointMode::Selective && selective.opLevel; }

  /// Rewrites the backward of one layer (`ops`, its forward in program order)
  /// to read recomputed values.
  void recomputeLayer(ArrayRef<Operation *> ops) {
    llvm::DenseSet<Operation *> inLayer(ops.begin(), ops.end());
    // Values the recomputation takes as they are: the layer's output (read
    // by forward ops of other modules), the routers' choices, and under
    // op-level checkpointing the matmuls' results.
    auto recomputable = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def || !inLayer.contains(def) || isa<RouterOp>(def) || (opLevel() && isMatmulLike(def)))
        return false;
      return llvm::none_of(v.getUsers(), [&](Operation *user) {
        return forward.contains(user) && !inLayer.contains(user);
      });
    };
    // The recomputable values the backward reads, and the first backward op
    // reading one: the recomputation goes right before it.
    SmallVector<Value> read;
    Operation *first = nullptr;
    for (Operation *op : ops)
      for (Value result : op->getResults()) {
        if (!recomputable(result))
          continue;
        bool isRead = false;
        for (Operation *user : result.getUsers())
          if (isBackward(user)) {
            isRead = true;
            if (!first || user->isBeforeInBlock(first))
              first = user;
          }
        if (isRead)
          read.push_back(result);
      }
    if (read.empty())
      return;
    // The ops to clone: those producing `read`, through recomputable operands.
    llvm::DenseSet<Operation *> needed;
    SmallVector<Value> worklist(read);
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (recomputable(v) && needed.insert(v.getDefiningOp()).second)
        llvm::append_range(worklist, v.getDefiningOp()->getOperands());
    }
    OpBuilder b(first);
    IRMapping mapping;
    for (Operation *op : ops)
      if (needed.contains(op)) {
        Operation *copy = b.clone(*op, mapping);
        copy->removeAttr(kSavedAttr);
        copy->setAttr(kRecomputedAttr, b.getUnitAttr());
      }
    for (Value v : read)
      v.replaceUsesWithIf(mapping.lookup(v),
                          [&](OpOperand &use) { return isBackward(use.getOwner()); });
  }

  /// A backward op: not in the forward, not the return (whose loss and
  /// metrics are the forward's own results).
  bool isBackward(Operation *op) const {
    return !forward.contains(op) && !isa<func::ReturnOp>(op);
  }

  /// kiln.saved as kiln-autodiff sets it: the results the backward reads.
  void markSaved(Operation *op) {
    SmallVector<int64_t> saved;
    for (OpResult result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *u) { return isBackward(u); }))
        saved.push_back(result.getResultNumber());
    if (saved.empty())
      op->removeAttr(kSavedAttr);
    else
      op->setAttr(kSavedAttr, DenseI64ArrayAttr::get(op->getContext(), saved));
  }

  llvm::DenseSet<Operation *> forward;
  SelectiveAcOption selective; ///< with mode "selective"
};

} // namespace
