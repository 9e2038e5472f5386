//===- KernelBase.cpp - Shared plumbing of the registered kernels ---------===//

#include "KernelBase.h"

#include "kiln/CustomKernels/Registry.h"

#include <mutex>

namespace kiln {
namespace kernel_ir {

LogicalResult KernelBase::verify(Operation *op, bool backward) const {
  SmallVector<Type> expected;
  if (failed(inferResults(op, backward, expected)))
    return failure();
  if (op->getNumResults() != expected.size())
    return callError(op) << "has " << op->getNumResults() << " results, expected "
                         << expected.size();
  for (auto [i, actual, want] : llvm::enumerate(op->getResultTypes(), expected))
    if (actual != want)
      return callError(op) << "result #" << i << " has type " << actual << ", expected "
                           << want;
  return success();
}

InFlightDiagnostic callError(Operation *op) {
  return op->emitOpError() << "(fqn '" << op->getAttrOfType<StringAttr>("fqn").getValue()
                           << "'): kernel '" << op->getAttrOfType<StringAttr>("kernel").getValue()
                           << "': ";
}

LogicalResult expectOperandCount(Operation *op, unsigned count) {
  if (op->getNumOperands() != count)
    return callError(op) << "takes " << count << " operands, got " << op->getNumOperands();
  return success();
}

LogicalResult expectTensor(Operation *op, unsigned index, StringRef name, int64_t rank,
                           bool f32Only) {
  auto type = typeOf(op->getOperand(index));
  Type elt = type.getElementType();
  if (!type.hasStaticShape() || (rank >= 0 ? type.getRank() != rank : type.getRank() < 1))
    return callError(op) << name << " (operand #" << index << ") must be a static tensor of rank "
                         << (rank >= 0 ? std::to_string(rank) : ">= 1") << ", got " << type;
  if (f32Only ? !elt.isF32() : !(elt.isF32() || elt.isBF16() || elt.isF16()))
    return callError(op) << name << " (operand #" << index << ") must be "
                         << (f32Only ? "f32" : "f32, bf16 or f16") << ", got " << type;
  return success();
}

RankedTensorType permuted(RankedTensorType type, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  return RankedTensorType::get(shape, type.getElementType());
}

Value transposed(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm, StringAttr fqn) {
  return TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(perm), fqn);
}

DictionaryAttr mergedOptions(OpBuilder &b, const KernelCall &call,
                             ArrayRef<NamedAttribute> extra) {
  NamedAttrList list(call.options ? call.options : b.getDictionaryAttr({}));
  for (const NamedAttribute &attr : extra)
    list.set(attr.getName(), attr.getValue());
  return list.getDictionary(b.getContext());
}

Operation *createForward(OpBuilder &b, Location loc, const KernelSpec &spec,
                         const KernelCall &call, DictionaryAttr options, TypeRange results,
                         ValueRange operands) {
  return KernelOp::create(b, loc, results, operands, b.getStringAttr(spec.name()), call.rule,
                          b.getStringAttr(spec.targetOp()), options, call.fqn);
}

Operation *createBackward(OpBuilder &b, Operation *forward, TypeRange results,
                          ValueRange operands) {
  auto fwd = cast<KernelOp>(forward);
  return KernelBackwardOp::create(b, fwd.getLoc(), results, operands, fwd.getKernelAttr(),
                                  fwd.getRuleAttr(), fwd.getTargetAttr(), fwd.getOptionsAttr(),
                                  fwd.getFqnAttr());
}

KernelCheckShape attentionCheckShape() {
  return {{"batch", 2}, {"seq", 256}, {"heads", 4}, {"kv_heads", 2}, {"head_dim", 64}};
}

RankedTensorType attentionCheckType(MLIRContext *context, const KernelCheckShape &shape,
                                    StringRef heads) {
  return RankedTensorType::get(
      {dim(shape, "batch"), dim(shape, "seq"), dim(shape, heads), dim(shape, "head_dim")},
      Float32Type::get(context));
}

float floatOption(DictionaryAttr options, StringRef name) {
  return float(cast<FloatAttr>(options.get(name)).getValueAsDouble());
}
bool flagOption(DictionaryAttr options, StringRef name) {
  auto attr = options.getAs<BoolAttr>(name);
  return attr && attr.getValue();
}
std::optional<int64_t> intOption(DictionaryAttr options, StringRef name) {
  if (auto attr = options.getAs<IntegerAttr>(name))
    return attr.getInt();
  return std::nullopt;
}

int64_t dim(const KernelCheckShape &shape, StringRef name) {
  for (const auto &[key, value] : shape)
    if (key == name)
      return value;
  llvm::report_fatal_error(llvm::Twine("check dimension '") + name + "' missing");
}

} // namespace kernel_ir

void registerCustomKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    kernel_ir::registerNkiRope();
    kernel_ir::registerNkiFlashAttention();
    kernel_ir::registerNkiRmsNorm();
    kernel_ir::registerNkiGroupedExperts();
    kernel_ir::registerChunkedCrossEntropy();
  });
}

} // namespace kiln
