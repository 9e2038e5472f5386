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
#include "kiln/Passes/HloToLinalg/CustomCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

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
    Location loc = op.getLoc();
    Type i64 = rewriter.getI64Type();
    auto pointerOf = [&](Value buffer) -> Value {
      Value index = memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, buffer);
      return arith::IndexCastOp::create(rewriter, loc, i64, index);
    };
    SmallVector<Value> pointers;
    for (Value input : adaptor.getInputs()) {
      auto type = cast<RankedTensorType>(input.getType());
      Value buffer = bufferization::ToBufferOp::create(
          rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()), input,
          /*read_only=*/true);
      pointers.push_back(pointerOf(buffer));
    }
    SmallVector<Value> outputs;
    for (Value result : op.getResults()) {
      RankedTensorType type = convertedType(getTypeConverter(), result);
      Value buffer = memref::AllocOp::create(
          rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()));
      outputs.push_back(buffer);
      pointers.push_back(pointerOf(buffer));
    }
    int64_t count = int64_t(pointers.size());
    Value table = memref::AllocaOp::create(rewriter, loc, MemRefType::get({count}, i64));
    for (auto [i, pointer] : llvm::enumerate(pointers))
      memref::StoreOp::create(rewriter, loc, pointer, table,
                              ValueRange{arith::ConstantIndexOp::create(rewriter, loc, i)});
    Value dynamic = memref::CastOp::create(
        rewriter, loc, MemRefType::get({ShapedType::kDynamic}, i64), table);
    Value siteValue = arith::ConstantIntOp::create(rewriter, loc, site.getInt(), 64);
    func::CallOp::create(rewriter, loc, kCustomCallFunction, TypeRange{},
                         ValueRange{siteValue, dynamic});
    SmallVector<Value> results;
    for (auto [result, buffer] : llvm::zip(op.getResults(), outputs))
      results.push_back(bufferization::ToTensorOp::create(
          rewriter, loc, convertedType(getTypeConverter(), result), buffer, /*restrict=*/true,
          /*writable=*/true));
    rewriter.replaceOp(op, results);
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

void kiln::hlo_to_linalg::declareCustomCallFunction(ModuleOp module) {
  if (module.lookupSymbol(kCustomCallFunction))
    return;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  Type i64 = b.getI64Type();
  auto declaration = func::FuncOp::create(
      b, module.getLoc(), kCustomCallFunction,
      b.getFunctionType({i64, MemRefType::get({ShapedType::kDynamic}, i64)}, {}));
  declaration.setPrivate();
  declaration->setAttr("llvm.emit_c_interface", b.getUnitAttr());
}

void kiln::hlo_to_linalg::populateCustomCallPatterns(const TypeConverter &converter,
                                                     RewritePatternSet &patterns) {
  patterns.add<CustomCallToHost>(converter, patterns.getContext());
}
