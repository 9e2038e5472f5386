//===- FuseElementwise.cpp - kiln-fuse-elementwise -------------------------===//
//
// Upstream's elementwise fusion with a control that also fuses a cheap
// producer of several consumers (Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "kiln/Passes/HloToLinalg/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "kiln/Passes/HloToLinalg/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

struct FuseElementwisePass : kiln::impl::FuseElementwiseBase<FuseElementwisePass> {
  using FuseElementwiseBase::FuseElementwiseBase;
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    unsigned limit = maxRecomputedOps;
    linalg::ControlFusionFn control = [limit](OpOperand *operand) {
      auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
      if (!producer)
        return false;
      if (producer->hasOneUse())
        return true;
      if (producer.getNumReductionLoops() != 0 ||
          producer.getBody()->getOperations().size() > limit + 1) // + the yield
        return false;
      // Every user recomputes it, each element once: none may keep the tensor
      // alive, nor read an element on every iteration of a loop it lacks (a
      // dot's operand would be recomputed once per contraction step).
      auto computesOnce = [&](OpOperand &use) {
        auto consumer = dyn_cast<linalg::GenericOp>(use.getOwner());
        return consumer && consumer.getMatchingIndexingMap(&use).isPermutation();
      };
      return llvm::all_of(producer->getResult(0).getUses(), computesOnce);
    };
    // Only producers of one use reshape or fold constants: the others would
    // be copied to no benefit.
    linalg::ControlFusionFn oneUse = [](OpOperand *operand) {
      Operation *producer = operand->get().getDefiningOp();
      return producer && producer->hasOneUse();
    };
    RewritePatternSet patterns(context);
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, oneUse);
    tensor::populateBubbleUpExpandShapePatterns(patterns);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
    context->getLoadedDialect<linalg::LinalgDialect>()->getCanonicalizationPatterns(patterns);
    linalg::populateConstantFoldLinalgOperations(patterns, oneUse);
    // Top-down: the order upstream's pass uses, for its compile time.
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     GreedyRewriteConfig().setUseTopDownTraversal(true))))
      return signalPassFailure();
  }
};

} // namespace
