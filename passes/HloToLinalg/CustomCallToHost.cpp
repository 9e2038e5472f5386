//===- CustomCallToHost.cpp - hlo custom calls -> calls into the host ------===//
//
// A custom call (an NKI kernel on Neuron) runs the host's implementation of
// its kernel. Every call goes through one external function of a fixed
// signature,
//
//   func.func private @kiln_custom_call(i64, memref<?xi64>)
//       attributes {llvm.emit_c_interface}
//
// whose i64 is the call site (numberCustomCallSites) and whose memref holds the
// aligned data pointer of every operand buffer, then of every result
// buffer (allocated here, dense row-major). The host knows each site's
// kernel, types and shapes from the hlo module (docs/compiled.md), and
// writes the results; the call's side effects keep it between the operands'
// buffers and the results' tensors.
//
//===----------------------------------------------------------------------===//

#include "HloToLinalg.h"
#include "kiln/Passes/HloToLinalg/HostCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::hlo_to_linalg;

namespace {

struct CustomCallToHost : OpConversionPattern<hlo::CustomCallOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::CustomCallOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto site = op->getAttrOfType<IntegerAttr>(kCallSiteAttr);
    if (!site)
      return op.emitError("a custom call without its kiln_call_site (numberCustomCallSites)");
    SmallVector<Type> resultTypes;
    for (Value result : op.getResults())
      resultTypes.push_back(convertedType(getTypeConverter(), result));
    Value siteValue = arith::ConstantIntOp::create(rewriter, op.getLoc(), site.getInt(), 64);
    rewriter.replaceOp(op, callHost(rewriter, op.getLoc(), kCustomCallFunction, {siteValue}, {},
                                    adaptor.getInputs(), resultTypes));
    return success();
  }
};

} // namespace

SmallVector<Operation *> kiln::numberCustomCallSites(ModuleOp module) {
  SmallVector<Operation *> sites;
  module.walk([&](hlo::CustomCallOp op) {
    op->setAttr(kCallSiteAttr,
                IntegerAttr::get(IntegerType::get(op.getContext(), 64), int64_t(sites.size())));
    sites.push_back(op);
  });
  return sites;
}

void kiln::hlo_to_linalg::populateCustomCallPatterns(const TypeConverter &converter,
                                                     RewritePatternSet &patterns) {
  patterns.add<CustomCallToHost>(converter, patterns.getContext());
}
