//===- MixedPrecision.cpp - kiln-mixed-precision: torchtitan's bf16 casts -===//
//
// The casts of FSDP2's MixedPrecisionPolicy(param_dtype=bf16,
// reduce_dtype=f32) as kiln.cast ops on @loss, before differentiation, so
// that the backward pass inherits them: parameters where they enter, and
// the activation operand and result of every linear. The routed experts
// round as a dense MLP's linears do: their input and result by casts (and
// the all-to-all dispatcher's combined result), their inner projections by
// the op's round_to. Attention's queries and keys are its matmuls' operands
// too: rounded after rope, as torchtitan's rope hands SDPA bf16 (its values
// are already a rounded linear's, seen through the head split). Kernels keep
// computing in float32 on the rounded values (docs/neuron.md).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace kiln {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct MixedPrecisionPass : public kiln::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (reduce != PrecisionDtype::Float32) {
      module.emitError() << "kiln-mixed-precision: reduce (training.mixed_precision_reduce) is '"
                         << wordOf(PrecisionDtype(reduce))
                         << "'; expected \"float32\" (gradients reduce in float32)";
      return signalPassFailure();
    }
    if (param == PrecisionDtype::Float32)
      return;
    auto fn = module.lookupSymbol<func::FuncOp>(funcName);
    if (!fn) {
      module.emitError() << "kiln-mixed-precision: no function @" << funcName;
      return signalPassFailure();
    }
    castFunction(fn, BFloat16Type::get(&getContext()));
  }

  /// Casts every parameter argument at the top of `fn` and each linear's
  /// and each experts op's input and result after their definitions, each
  /// value once.
  void castFunction(func::FuncOp fn, Type narrow) {
    OpBuilder b(fn.getContext());
    TypeAttr to = TypeAttr::get(narrow);
    llvm::DenseMap<Value, Value> narrowed;
    auto castOnce = [&](Value value, StringRef fqn) -> Value {
      if (isRounded(value))
        return value;
      Value &slot = narrowed[value];
      if (slot)
        return slot;
      if (auto arg = dyn_cast<BlockArgument>(value))
        b.setInsertionPointToStart(arg.getOwner());
      else
        b.setInsertionPointAfter(value.getDefiningOp());
      auto cast = CastOp::create(b, value.getLoc(), value, to, b.getStringAttr(fqn));
      value.replaceAllUsesExcept(cast.getResult(), cast);
      slot = cast.getResult();
      return slot;
    };
    // Parameters first, in argument order, so that the casts lead the body.
    Block &body = fn.getBody().front();
    for (BlockArgument arg : llvm::reverse(body.getArguments()))
      if (fn.getArgAttr(arg.getArgNumber(), kParamAttr) && isF32Tensor(arg) &&
          !arg.use_empty())
        castOnce(arg, owningModule(arg));
    // Collected first: casting inserts ops the walk would visit.
    SmallVector<Operation *> rounded;
    fn.walk([&](Operation *op) {
      if (isa<LinearOp, GroupedExpertsOp, ExpertDispatchOp, ExpertCombineOp>(op) ||
          isExpertsKernel(op))
        rounded.push_back(op);
    });
    SmallVector<AttentionOp> attentions;
    fn.walk([&](AttentionOp op) { attentions.push_back(op); });
    // The dispatcher's ops stand for the experts' own input (dispatch) and
    // result (combine) around the experts over the buffer.
    for (Operation *op : rounded) {
      StringRef fqn = op->getAttrOfType<StringAttr>("fqn").getValue();
      if (auto experts = dyn_cast<GroupedExpertsOp>(op))
        experts.setRoundToAttr(to);
      if (!isa<ExpertCombineOp>(op))
        castOnce(op->getOperand(0), owningModule(op->getOperand(0)));
      if (!isa<ExpertDispatchOp>(op))
        castOnce(op->getResult(0), fqn);
    }
    // After the linears: a value that is a rounded linear's result seen
    // through a reshape is not cast twice.
    for (AttentionOp op : attentions)
      for (Value operand : {op.getQ(), op.getK(), op.getV()})
        castOnce(operand, op.getFqn());
  }

  /// A cast's result, or one seen through reshapes: rounding it again would
  /// change nothing.
  static bool isRounded(Value value) {
    while (auto reshape = value.getDefiningOp<ReshapeOp>())
      value = reshape.getInput();
    return static_cast<bool>(value.getDefiningOp<CastOp>());
  }

  /// A kernel in place of kiln.grouped_experts: in the op's layout (x
  /// first, the result first), computing in float32 inside.
  static bool isExpertsKernel(Operation *op) {
    auto kernel = dyn_cast<KernelOp>(op);
    return kernel && kernel.getTarget() == GroupedExpertsOp::getOperationName();
  }

  static bool isF32Tensor(Value value) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    return type && type.getElementType().isF32();
  }
};

} // namespace
