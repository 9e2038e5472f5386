//===- CollectiveToHost.cpp - hlo collectives -> calls into the host ------===//
//
// A collective (all-gather, reduce-scatter, all-reduce, all-to-all) and the
// replica id run in the host, which owns the ranks' MPI communicators: each
// becomes a call of
//
//   func.func private @kiln_collective(i64, memref<?xi64>)
//       attributes {llvm.emit_c_interface}
//
// with its site (numberCollectiveSites) and the aligned data pointers of
// its operand's buffer and of its result's (allocated here, dense
// row-major). The host knows each site's kind, dimension, reduction and
// replica groups from the hlo module (docs/compiled.md), so the words
// carry none of them: a group list names every rank of the world.
//
//===----------------------------------------------------------------------===//

#include "HloToLinalg.h"
#include "kiln/Passes/HloToLinalg/HostCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::hlo_to_linalg;

namespace {

bool isCollectiveSite(Operation *op) {
  return isa<hlo::AllGatherOp, hlo::ReduceScatterOp, hlo::AllReduceOp, hlo::AllToAllOp,
             hlo::ReplicaIdOp>(op);
}

template <typename OpT>
struct CollectiveToHost : OpConversionPattern<OpT> {
  using OpConversionPattern<OpT>::OpConversionPattern;
  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto site = op->template getAttrOfType<IntegerAttr>(kCollectiveSiteAttr);
    if (!site)
      return op.emitError("a collective without its kiln_collective_site "
                          "(numberCollectiveSites)");
    Type result = convertedType(this->getTypeConverter(), op.getResult());
    Value siteValue = arith::ConstantIntOp::create(rewriter, op.getLoc(), site.getInt(), 64);
    rewriter.replaceOp(op, callHost(rewriter, op.getLoc(), kCollectiveFunction, {siteValue}, {},
                                    adaptor.getOperands(), TypeRange{result}));
    return success();
  }
};

} // namespace

SmallVector<Operation *> kiln::numberCollectiveSites(ModuleOp module) {
  SmallVector<Operation *> sites;
  module.walk([&](Operation *op) {
    if (!isCollectiveSite(op))
      return;
    op->setAttr(kCollectiveSiteAttr,
                IntegerAttr::get(IntegerType::get(op->getContext(), 64), int64_t(sites.size())));
    sites.push_back(op);
  });
  return sites;
}

void kiln::hlo_to_linalg::populateCollectivePatterns(const TypeConverter &converter,
                                                     RewritePatternSet &patterns) {
  patterns.add<CollectiveToHost<hlo::AllGatherOp>, CollectiveToHost<hlo::ReduceScatterOp>,
               CollectiveToHost<hlo::AllReduceOp>, CollectiveToHost<hlo::AllToAllOp>,
               CollectiveToHost<hlo::ReplicaIdOp>>(converter, patterns.getContext());
}
