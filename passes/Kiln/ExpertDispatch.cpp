//===- ExpertDispatch.cpp - kiln-expert-dispatch: the all-to-all dispatcher ===//
//
// grouped_experts(x, w, ids, stacks) becomes
//   rows, row_w, row_ids, slots = expert_dispatch(x, w, ids)
//   out = grouped_experts(rows, row_w, row_ids, stacks) {blocked}
//   y = expert_combine(slots, out)
// before differentiation, so the backward is the VJPs of those ops. The
// buffer's shape is static (GShard's capacity), which is what lets
// kiln-partition exchange it with a plain all-to-all.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <cmath>

namespace kiln {
#define GEN_PASS_DEF_EXPERTDISPATCH
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The capacity of one chunk's part of a block, or an error on `op`.
FailureOr<int64_t> capacityOf(GroupedExpertsOp op, int64_t groups, int64_t chunks,
                              double capacityFactor) {
  auto ids = op.getExperts().getType();
  int64_t experts = op.getW1().getType().getDimSize(0), k = ids.getShape().back();
  if (ids.getRank() < 2 || ids.getDimSize(0) % chunks)
    return op.emitOpError() << "(fqn '" << op.getFqn() << "'): kiln-expert-dispatch: chunks="
                            << chunks << " must divide the batch of " << ids.getDimSize(0)
                            << " rows";
  if (experts % groups)
    return op.emitOpError() << "(fqn '" << op.getFqn() << "'): kiln-expert-dispatch: groups="
                            << groups << " must divide the " << experts << " experts";
  int64_t perChunk = ids.getNumElements() / k / chunks;
  // No block receives more than min(k, its experts) pairs of one token.
  int64_t dropless = perChunk * std::min(k, experts / groups);
  if (capacityFactor == 0)
    return dropless;
  double wanted = std::ceil(capacityFactor * double(perChunk) * double(k) / double(groups));
  return std::max<int64_t>(1, std::min<int64_t>(dropless, int64_t(wanted)));
}

bool dispatched(GroupedExpertsOp op) { return op.getBlocked() || op.getExpertAxes(); }

struct DispatchThroughBuffer : OpRewritePattern<GroupedExpertsOp> {
  DispatchThroughBuffer(MLIRContext *context, int64_t groups, int64_t chunks,
                        double capacityFactor)
      : OpRewritePattern(context), groups(groups), chunks(chunks),
        capacityFactor(capacityFactor) {}

  LogicalResult matchAndRewrite(GroupedExpertsOp op, PatternRewriter &rewriter) const override {
    if (dispatched(op))
      return rewriter.notifyMatchFailure(op, "already dispatched or partitioned");
    FailureOr<int64_t> capacity = capacityOf(op, groups, chunks, capacityFactor);
    if (failed(capacity)) // the pass checked every op before rewriting
      return failure();
    Location loc = op.getLoc();
    auto dispatch = ExpertDispatchOp::create(
        rewriter, loc, op.getInput(), op.getWeights(), op.getExperts(),
        rewriter.getI64IntegerAttr(groups), rewriter.getI64IntegerAttr(chunks),
        rewriter.getI64IntegerAttr(*capacity),
        rewriter.getI64IntegerAttr(op.getW1().getType().getDimSize(0)), op.getFqnAttr());
    auto blocked = GroupedExpertsOp::create(
        rewriter, loc, dispatch.getRows(), dispatch.getRowWeights(), dispatch.getRowExperts(),
        op.getW1(), op.getW3(), op.getW2(), op.getFqnAttr(), /*expert_axes=*/nullptr,
        /*num_experts=*/nullptr, rewriter.getUnitAttr(), op.getRoundToAttr());
    rewriter.replaceOpWithNewOp<ExpertCombineOp>(op, dispatch.getSlots(), blocked.getResult(),
                                                 rewriter.getI64IntegerAttr(chunks),
                                                 op.getFqnAttr());
    return success();
  }

  int64_t groups, chunks;
  double capacityFactor;
};

struct ExpertDispatchPass : public kiln::impl::ExpertDispatchBase<ExpertDispatchPass> {
  using ExpertDispatchBase::ExpertDispatchBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (groups < 1 || chunks < 1 || !(capacityFactor >= 0)) {
      module.emitError() << "kiln-expert-dispatch: groups and chunks must be >= 1 and "
                            "capacity-factor >= 0, got "
                         << int64_t(groups) << ", " << int64_t(chunks) << " and "
                         << double(capacityFactor);
      return signalPassFailure();
    }
    // A kernel in the experts' place takes the tokens, not the buffer.
    WalkResult checked = module.walk([&](Operation *op) {
      if (auto call = dyn_cast<KernelOp>(op);
          call && call.getTarget() == GroupedExpertsOp::getOperationName()) {
        call.emitOpError() << "(fqn '" << call.getFqn() << "'): kiln-expert-dispatch: rule '"
                           << call.getRule() << "' put kernel '" << call.getKernel()
                           << "' in place of kiln.grouped_experts; the all-to-all dispatcher "
                              "needs the op itself (drop the rule, or dispatch by all-gather)";
        return WalkResult::interrupt();
      }
      auto experts = dyn_cast<GroupedExpertsOp>(op);
      if (experts && !dispatched(experts) &&
          failed(capacityOf(experts, groups, chunks, capacityFactor)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (checked.wasInterrupted())
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    patterns.add<DispatchThroughBuffer>(&getContext(), groups, chunks, capacityFactor);
    // One rewrite per op (the new experts op is blocked): no fixpoint, and
    // nothing else folded.
    walkAndApplyPatterns(module, std::move(patterns));
  }
};

} // namespace
