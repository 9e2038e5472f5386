//===- KernelSpec.h - What a substitutable kernel declares -------*- C++ -*-===//
//
// A kernel that override rules may put in place of a kiln op: the op it
// replaces, the form and hardware constraints it accepts, how it rewrites
// the op (transposes into its layout included), and the semantics of the
// kiln.kernel / kiln.kernel_backward ops that call it (types, cost,
// sharding, VJP). Specs register by name at start-up (lib/CustomKernels, one file
// per kernel); the dialect only looks them up, so it depends on no runtime.
// Targets attach their implementations to a spec (the CPU one through
// kiln::CpuKernelImpl).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KERNELSPEC_H
#define KILN_DIALECT_KILN_IR_KERNELSPEC_H

#include "kiln/Dialect/Kiln/IR/GemmShape.h"
#include "kiln/Dialect/Kiln/IR/NkiBinding.h"
#include "kiln/Dialect/Kiln/IR/OpClass.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Support/ClosedSets.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// The machine kernels are checked against (`target.name`, `target.lnc`).
/// trn2 and trn1 are Trainium (NKI constraints apply); cpu runs the CPU
/// implementations with no hardware constraint.
struct KernelTarget {
  TargetName name = TargetName::Trn2;
  int64_t lnc = 2; ///< logical NeuronCore config: physical cores per rank
  bool isTrainium() const { return name != TargetName::Cpu; }
};

/// How the Neuron backend emits a kernel: an XLA custom-call to
/// `customCallTarget` naming the NKI kernel functions.
struct NeuronKernel {
  std::string customCallTarget = "AwsNeuronCustomNativeKernel";
  std::string forward;  ///< NKI kernel identity of the forward
  std::string backward; ///< and of the backward
  /// The NKI Library functions each direction calls, where the kernel is
  /// bound to them: the custom call then passes its operands in the
  /// function's order (NkiBinding.h).
  std::optional<NkiBinding> forwardBinding, backwardBinding;

  const NkiBinding *binding(bool isBackward) const {
    const std::optional<NkiBinding> &b = isBackward ? backwardBinding : forwardBinding;
    return b ? &*b : nullptr;
  }
};

/// A block of a split that a partitioned kernel call computes (its experts
/// under expert parallelism): `rows` per rank of a dimension split over the
/// grid `axes`. Backends pass the rank's first row to the call as one more
/// operand, an i32 scalar after the op's own (the HLO from the partition id,
/// the CPU executor from the rank's grid coordinate), so that one SPMD
/// program serves every rank.
struct GridBlock {
  GridAxes axes;
  int64_t rows = 0;
};

/// The rule and module a kernel call belongs to, for the ops a spec builds.
struct KernelCall {
  mlir::StringAttr rule;
  mlir::StringAttr fqn;
  mlir::DictionaryAttr options; ///< the rule's options
};

class KernelSpec {
public:
  virtual ~KernelSpec();

  virtual llvm::StringRef name() const = 0;
  /// The op it replaces, e.g. "kiln.rope".
  virtual llvm::StringRef targetOp() const = 0;
  virtual llvm::StringRef summary() const = 0;
  /// The layout its operands take, in words.
  virtual llvm::StringRef layout() const = 0;
  /// Largest max-abs difference kiln check-kernel accepts against the
  /// replaced decomposition, f32 and bf16.
  virtual double tolerance(bool bf16) const = 0;
  /// Empty for CPU-only kernels.
  virtual std::optional<NeuronKernel> neuron() const { return std::nullopt; }

  /// Why the kernel does not implement `op` as it stands (a form it was not
  /// written for, e.g. non-causal attention), or "" when it does.
  virtual std::string unsupportedForm(mlir::Operation *op) const {
    (void)op;
    return "";
  }
  /// Other ops the substitution of `op` takes in (a fused producer); they
  /// are claimed with `op` and must have no other users.
  virtual llvm::SmallVector<mlir::Operation *> absorbed(mlir::Operation *op) const {
    (void)op;
    return {};
  }
  /// The options an override rule may give the kernel (its `options`
  /// object's keys); any other key is refused, naming the rule. None by
  /// default: the options the kernel reads from the node it replaces are its
  /// own.
  virtual llvm::ArrayRef<llvm::StringLiteral> ruleOptions() const { return {}; }
  /// Appends each constraint `op` violates on `target`, as
  /// "<constraint> (<values>)", e.g. "seq % (128 * lnc) == 0 (seq = 200,
  /// 128 * lnc = 256)".
  virtual void checkConstraints(mlir::Operation *op, const KernelTarget &target,
                                llvm::SmallVectorImpl<std::string> &violations) const = 0;
  /// Builds the kernel call replacing `op` (and what absorbed() took) at the
  /// builder's insertion point; returns the values replacing op's results.
  virtual llvm::SmallVector<mlir::Value> substitute(mlir::OpBuilder &b, mlir::Operation *op,
                                                    const KernelCall &call) const = 0;

  /// kiln.kernel (backward = false) or kiln.kernel_backward of this kernel:
  /// checks operand and result types, emitting an error on `op`.
  virtual mlir::LogicalResult verify(mlir::Operation *op, bool backward) const = 0;
  /// FLOPs of the call, in double (CostOpInterface::getFlops).
  virtual double flops(mlir::Operation *op, bool backward) const = 0;
  /// The class its forward and backward run at: the replaced op's, or a
  /// GEMM's when it fuses one (a loss kernel that takes in the output
  /// projection).
  virtual OpClass opClass() const = 0;
  /// Bytes the call reads and writes besides its operands and results once
  /// each (a fused loss's passes over its chunk of logits); 0 by default.
  virtual int64_t passBytes(mlir::Operation *op, bool backward) const {
    (void)op, (void)backward;
    return 0;
  }
  /// Appends the BLAS GEMMs the CPU implementation of the call issues
  /// (CostOpInterface::getGemms); none by default.
  virtual void gemms(mlir::Operation *op, bool backward,
                     llvm::SmallVectorImpl<GemmShape> &out) const {
    (void)op, (void)backward, (void)out;
  }
  virtual ShardingRule shardingRule(mlir::Operation *op, bool backward) const = 0;
  /// The forward's VJP: builds the kernel's backward from the cotangents of
  /// the forward's results (null where none flows).
  virtual mlir::LogicalResult buildVjp(mlir::Operation *forward, mlir::OpBuilder &b,
                                       llvm::ArrayRef<mlir::Value> resultGrads,
                                       llvm::SmallVectorImpl<mlir::Value> &operandGrads) const = 0;
  /// Operands of the backward that carry cotangents.
  virtual llvm::SmallVector<unsigned> cotangentOperands() const = 0;
  /// Called by kiln-partition on a clone with local shapes of `global`, when
  /// the clone computes a share of a split loop (`split`); `loops` holds the
  /// grid axes each loop of shardingRule(global) is split over. E.g. a mean
  /// over split positions records the global count.
  virtual void localize(mlir::Operation *clone, mlir::Operation *global, bool split,
                        llvm::ArrayRef<GridAxes> loops) const {
    (void)clone, (void)global, (void)split, (void)loops;
  }
  /// The block of a split the (partitioned) call `op` computes, whose first
  /// row backends pass as an extra operand; none by default.
  virtual std::optional<GridBlock> gridBlock(mlir::Operation *op) const {
    (void)op;
    return std::nullopt;
  }
};

/// Registers `spec` under its name (start-up only; a second spec of one name
/// is a programming error).
void registerKernelSpec(std::unique_ptr<KernelSpec> spec);
/// The spec registered as `name`, or null.
const KernelSpec *lookupKernelSpec(llvm::StringRef name);
/// Every registered spec, by name.
std::vector<const KernelSpec *> registeredKernelSpecs();

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_KERNELSPEC_H
