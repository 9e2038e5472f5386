//===- HloToLinalg.cpp - kiln-convert-hlo-to-linalg ------------------------===//
//
// The pass (no hlo op may remain; other dialects are left alone), its type converter,
// the builders the op families share, and the patterns that refuse the ops
// compiled mode does not lower yet with a message naming them.
//
//===----------------------------------------------------------------------===//

#include "HloToLinalg.h"
#include "kiln/Dialect/Kiln/IR/StateAliases.h"
#include "kiln/Passes/HloToLinalg/HostCalls.h"
#include "kiln/Passes/HloToLinalg/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace kiln {
#define GEN_PASS_DEF_CONVERTHLOTOLINALG
#include "kiln/Passes/HloToLinalg/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace kiln::hlo_to_linalg {

HloTypeConverter::HloTypeConverter() {
  addConversion([](Type type) { return type; });
  addConversion([](RankedTensorType type) -> Type {
    auto integer = dyn_cast<IntegerType>(type.getElementType());
    if (integer && !integer.isSignless())
      return type.clone(IntegerType::get(type.getContext(), integer.getWidth()));
    return type;
  });
}

RankedTensorType convertedType(const TypeConverter *converter, Value value) {
  return cast<RankedTensorType>(converter->convertType(value.getType()));
}

bool isUnsignedElement(Type type) {
  auto integer = dyn_cast<IntegerType>(getElementTypeOrSelf(type));
  return integer && integer.isUnsigned();
}

Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType type, ValueRange inputs,
                       const ScalarFn &fn) {
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  unsigned rank = type.getRank();
  AffineMap identity = b.getMultiDimIdentityMap(rank);
  SmallVector<AffineMap> maps;
  for (Value in : inputs)
    maps.push_back(cast<RankedTensorType>(in.getType()).getRank() == 0
                       ? AffineMap::get(rank, 0, {}, b.getContext())
                       : identity);
  maps.push_back(identity);
  SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{type}, inputs, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(nb, nl, fn(nb, nl, args.drop_back()));
      });
  return generic.getResult(0);
}

Value buildFilled(OpBuilder &b, Location loc, RankedTensorType type, Value value) {
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  return linalg::FillOp::create(b, loc, ValueRange{value}, ValueRange{init}).getResult(0);
}

Value extractScalar(OpBuilder &b, Location loc, Value tensor) {
  return tensor::ExtractOp::create(b, loc, tensor, ValueRange{});
}

Value combineScalars(OpBuilder &b, Location loc, hlo::Combiner combiner, Value acc, Value x,
                     bool isUnsigned) {
  Type type = acc.getType();
  if (isa<FloatType>(type)) {
    switch (combiner) {
    case hlo::Combiner::add:
      return arith::AddFOp::create(b, loc, acc, x);
    case hlo::Combiner::mul:
      return arith::MulFOp::create(b, loc, acc, x);
    case hlo::Combiner::max: // XLA's max and min propagate NaN
      return arith::MaximumFOp::create(b, loc, acc, x);
    case hlo::Combiner::min:
      return arith::MinimumFOp::create(b, loc, acc, x);
    }
  }
  if (type.isInteger(1)) {
    bool any = combiner == hlo::Combiner::add || combiner == hlo::Combiner::max;
    return any ? Value(arith::OrIOp::create(b, loc, acc, x))
               : Value(arith::AndIOp::create(b, loc, acc, x));
  }
  switch (combiner) {
  case hlo::Combiner::add:
    return arith::AddIOp::create(b, loc, acc, x);
  case hlo::Combiner::mul:
    return arith::MulIOp::create(b, loc, acc, x);
  case hlo::Combiner::max:
    return isUnsigned ? Value(arith::MaxUIOp::create(b, loc, acc, x))
                      : Value(arith::MaxSIOp::create(b, loc, acc, x));
  case hlo::Combiner::min:
    return isUnsigned ? Value(arith::MinUIOp::create(b, loc, acc, x))
                      : Value(arith::MinSIOp::create(b, loc, acc, x));
  }
  llvm_unreachable("every combiner is handled");
}

Value clampedIndex(OpBuilder &b, Location loc, Value value, bool isUnsigned, int64_t upper) {
  Value index = isUnsigned ? Value(arith::IndexCastUIOp::create(b, loc, b.getIndexType(), value))
                           : Value(arith::IndexCastOp::create(b, loc, b.getIndexType(), value));
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value top = arith::ConstantIndexOp::create(b, loc, std::max<int64_t>(upper, 0));
  return arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, index, zero), top);
}

void declareHostFunction(ModuleOp module, StringRef name, unsigned leadingArgs) {
  if (module.lookupSymbol(name))
    return;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  Type i64 = b.getI64Type();
  SmallVector<Type> inputs(leadingArgs, i64);
  inputs.push_back(MemRefType::get({ShapedType::kDynamic}, i64));
  auto declaration =
      func::FuncOp::create(b, module.getLoc(), name, b.getFunctionType(inputs, {}));
  declaration.setPrivate();
  declaration->setAttr("llvm.emit_c_interface", b.getUnitAttr());
}

Value wordTable(OpBuilder &b, Location loc, ValueRange words) {
  Type i64 = b.getI64Type();
  Value buffer = memref::AllocaOp::create(b, loc, MemRefType::get({int64_t(words.size())}, i64));
  for (auto [i, word] : llvm::enumerate(words))
    memref::StoreOp::create(b, loc, word, buffer,
                            ValueRange{arith::ConstantIndexOp::create(b, loc, int64_t(i))});
  return memref::CastOp::create(b, loc, MemRefType::get({ShapedType::kDynamic}, i64), buffer);
}

SmallVector<Value> callHost(OpBuilder &b, Location loc, StringRef name, ValueRange leadingArgs,
                            ArrayRef<int64_t> words, ValueRange inputs, TypeRange resultTypes) {
  Type i64 = b.getI64Type();
  SmallVector<Value> table;
  for (int64_t w : words)
    table.push_back(arith::ConstantIntOp::create(b, loc, w, 64));
  auto pointerOf = [&](Value buffer) -> Value {
    Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
    return arith::IndexCastOp::create(b, loc, i64, index);
  };
  for (Value input : inputs) {
    auto type = cast<RankedTensorType>(input.getType());
    table.push_back(pointerOf(bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType()), input,
        /*read_only=*/true)));
  }
  SmallVector<Value> outputs;
  for (Type type : resultTypes) {
    auto tensor = cast<RankedTensorType>(type);
    outputs.push_back(memref::AllocOp::create(
        b, loc, MemRefType::get(tensor.getShape(), tensor.getElementType())));
    table.push_back(pointerOf(outputs.back()));
  }
  SmallVector<Value> args(leadingArgs);
  args.push_back(wordTable(b, loc, table));
  // A call of an external function has unknown effects: nothing moves
  // across it, so the results are read after the host wrote them.
  func::CallOp::create(b, loc, name, TypeRange{}, args);
  SmallVector<Value> results;
  for (auto [type, output] : llvm::zip(resultTypes, outputs))
    results.push_back(bufferization::ToTensorOp::create(b, loc, type, output,
                                                        /*restrict=*/true, /*writable=*/true));
  return results;
}

} // namespace kiln::hlo_to_linalg

namespace {

using namespace kiln::hlo_to_linalg;

/// The hlo ops compiled mode does not lower yet: an error naming the op and
/// what is missing (the location names the kiln fqn it came from).
struct RefuseUnlowered : ConversionPattern {
  RefuseUnlowered(const TypeConverter &converter, MLIRContext *context)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/0, context) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value>,
                                ConversionPatternRewriter &) const override {
    if (!isa<hlo::HloDialect>(op->getDialect()))
      return failure();
    InFlightDiagnostic error = op->emitError() << "compiled mode cannot lower '" << op->getName()
                                               << "'";
    if (auto name = dyn_cast<NameLoc>(op->getLoc()))
      error << " (from " << name.getName().getValue() << ")";
    return error << ": no lowering";
  }
};

struct ConvertHloToLinalgPass
    : kiln::impl::ConvertHloToLinalgBase<ConvertHloToLinalgPass> {
  using ConvertHloToLinalgBase::ConvertHloToLinalgBase;
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    if (!numberCustomCallSites(getOperation()).empty())
      declareHostFunction(getOperation(), kCustomCallFunction, 1);
    if (!numberCollectiveSites(getOperation()).empty())
      declareHostFunction(getOperation(), kCollectiveFunction, 1);
    if (blas)
      declareBlasFunctions(getOperation());
    HloTypeConverter converter;
    RewritePatternSet patterns(context);
    populateElementwisePatterns(converter, patterns);
    populateShapePatterns(converter, patterns);
    populateContractionPatterns(converter, patterns);
    populateIndexingPatterns(converter, patterns);
    populateCustomCallPatterns(converter, patterns);
    populateCollectivePatterns(converter, patterns);
    if (blas)
      populateBlasPatterns(converter, patterns);
    patterns.add<RefuseUnlowered>(converter, context);
    ConversionTarget target(*context);
    target.addLegalDialect<arith::ArithDialect, bufferization::BufferizationDialect,
                           func::FuncDialect, linalg::LinalgDialect, math::MathDialect,
                           memref::MemRefDialect, scf::SCFDialect, tensor::TensorDialect>();
    target.addIllegalDialect<hlo::HloDialect>();
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      return signalPassFailure();
    // The kiln.* argument and result attributes name the Neuron artifact's
    // parameters and outputs; bufferization turns results into arguments,
    // where the same names would repeat. The manifest keeps them.
    getOperation().walk([](func::FuncOp func) {
      // What the names said, for kiln-compact-buffers: the state each
      // result updates.
      SmallVector<int64_t> updated = updatedArguments(func);
      if (llvm::any_of(updated, [](int64_t a) { return a >= 0; }))
        func->setAttr(kInputOutputAliasAttr, DenseI64ArrayAttr::get(func.getContext(), updated));
      auto strip = [&](DictionaryAttr attrs) {
        SmallVector<NamedAttribute> kept;
        if (attrs)
          for (NamedAttribute a : attrs)
            if (!a.getName().getValue().starts_with("kiln."))
              kept.push_back(a);
        return DictionaryAttr::get(func.getContext(), kept);
      };
      // The runner passes the caller's tensors: the compiled code must not
      // write them (bufferization copies an argument it would update).
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        func.setArgAttrs(i, strip(func.getArgAttrDict(i)));
        if (isa<TensorType>(func.getArgumentTypes()[i]))
          func.setArgAttr(i, "bufferization.writable", BoolAttr::get(func.getContext(), false));
      }
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        func.setResultAttrs(i, strip(func.getResultAttrDict(i)));
    });
  }
};

} // namespace
