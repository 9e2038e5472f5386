//===- NkiRmsNorm.cpp - nki_rms_norm: a fused RMSNorm for kiln.rms_norm ---===//
//
// A fused RMSNorm in Kiln's own layout ([..., dim], weight [dim]): no
// transposes; forward and backward each one pass over the rows. The NKI
// Library has no RMSNorm kernel a training step can call (rmsnorm_quant_kernel
// quantizes its output to FP8, rmsnorm_tkg is a decode-phase subkernel, and
// neither has a backward), so on Trainium targets the rule is refused with
// that reason; the CPU target runs it.
//
//===----------------------------------------------------------------------===//

#include "KernelBase.h"

#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ForwardKernels.h"

namespace kiln::kernel_ir {
namespace {

class NkiRmsNorm final : public KernelBase {
public:
  StringRef name() const override { return "nki_rms_norm"; }
  StringRef targetOp() const override { return "kiln.rms_norm"; }
  OpClass opClass() const override { return OpClass::Vector; }
  StringRef summary() const override {
    return "RMSNorm, forward and backward fused per row (CPU only: nkilib has no training "
           "RMSNorm)";
  }
  StringRef layout() const override { return "x [..., dim], weight [dim] (Kiln's layout)"; }
  double tolerance(bool bf16) const override { return bf16 ? 2e-2 : 1e-6; }
  std::optional<NeuronKernel> neuron() const override {
    return NeuronKernel{"AwsNeuronCustomNativeKernel", "rmsnorm_fwd", "rmsnorm_bwd"};
  }

  void checkConstraints(Operation *, const KernelTarget &target,
                        SmallVectorImpl<std::string> &violations) const override {
    if (target.isTrainium())
      violations.push_back(
          "an NKI Library RMSNorm for training (nkilib @ d2ad3a57 has none: "
          "rmsnorm_quant_kernel quantizes its output to FP8, rmsnorm_tkg is a decode-phase "
          "subkernel, neither has a backward; target.name=cpu runs this kernel)");
  }

  SmallVector<Value> substitute(OpBuilder &b, Operation *op,
                                const KernelCall &call) const override {
    auto norm = cast<RmsNormOp>(op);
    DictionaryAttr options =
        mergedOptions(b, call, {b.getNamedAttr("eps", norm.getEpsAttr())});
    Operation *kernel = createForward(b, op->getLoc(), *this, call, options,
                                      {norm.getType()}, {norm.getInput(), norm.getWeight()});
    return {kernel->getResult(0)};
  }

  LogicalResult inferResults(Operation *op, bool backward,
                             SmallVectorImpl<Type> &results) const override {
    if (!op->getAttrOfType<DictionaryAttr>("options").getAs<FloatAttr>("eps"))
      return callError(op) << "options must hold 'eps' (f32)";
    // Forward (x, weight); backward (dy, x, weight).
    unsigned x = backward ? 1 : 0;
    if (failed(expectOperandCount(op, backward ? 3 : 2)) ||
        failed(expectTensor(op, x, "x", -1)) || failed(expectTensor(op, x + 1, "weight", 1)))
      return failure();
    auto input = typeOf(op->getOperand(x)), weight = typeOf(op->getOperand(x + 1));
    if (input.getRank() < 1 || weight.getDimSize(0) != input.getShape().back())
      return callError(op) << "weight " << weight << " must be [" << input.getShape().back()
                           << "], the last dimension of x " << input;
    if (backward && op->getOperand(0).getType() != input)
      return callError(op) << "dy must have x's type " << input;
    results.push_back(input);
    if (backward)
      results.push_back(weight);
    return success();
  }

  double flops(Operation *op, bool backward) const override {
    return (backward ? 8.0 : 4.0) * typeOf(op->getOperand(backward ? 1 : 0)).getNumElements();
  }
  ShardingRule shardingRule(Operation *op, bool backward) const override {
    return rmsNormShardingRule(typeOf(op->getOperand(backward ? 1 : 0)).getRank(), backward);
  }

  LogicalResult buildVjp(Operation *forward, OpBuilder &b, ArrayRef<Value> grads,
                         SmallVectorImpl<Value> &operandGrads) const override {
    Value x = forward->getOperand(0), w = forward->getOperand(1);
    Operation *bwd = createBackward(b, forward, {x.getType(), w.getType()}, {grads[0], x, w});
    operandGrads.append(bwd->result_begin(), bwd->result_end());
    return success();
  }
  SmallVector<unsigned> cotangentOperands() const override { return {0}; }

  KernelCheckShape checkShape() const override {
    return {{"batch", 4}, {"seq", 64}, {"dim", 256}};
  }
  SmallVector<CheckInput> checkInputs(MLIRContext *context,
                                      const KernelCheckShape &s) const override {
    Type f32 = Float32Type::get(context);
    int64_t d = dim(s, "dim");
    return {{"x", RankedTensorType::get({dim(s, "batch"), dim(s, "seq"), d}, f32)},
            {"weight", RankedTensorType::get({d}, f32)}};
  }
  SmallVector<CheckResult> buildReference(OpBuilder &b, Location loc, ValueRange in,
                                                     const KernelCheckShape &,
                                                     StringAttr fqn) const override {
    return {{RmsNormOp::create(b, loc, in[0], in[1], b.getF32FloatAttr(1e-6f), fqn), "out"}};
  }

  void runForward(DictionaryAttr options, MutableArrayRef<Tensor> in,
                  SmallVectorImpl<Tensor> &out) const override {
    out.push_back(kernels::rmsNorm(in[0], in[1], floatOption(options, "eps")));
  }
  void runBackward(DictionaryAttr options, MutableArrayRef<Tensor> in,
                   SmallVectorImpl<Tensor> &out) const override {
    auto [dx, dw] = kernels::rmsNormBackward(in[0], in[1], in[2], floatOption(options, "eps"));
    out.append({dx, dw});
  }
};

} // namespace

void registerNkiRmsNorm() { registerKernelSpec(std::make_unique<NkiRmsNorm>()); }

} // namespace kiln::kernel_ir
