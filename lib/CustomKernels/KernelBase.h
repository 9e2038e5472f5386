//===- KernelBase.h - Shared plumbing of the registered kernels --*- C++ -*-===//
//
// Private to lib/CustomKernels: the base every kernel derives from (a
// KernelSpec with a CPU implementation and a check case) and the IR helpers
// their rewrites share.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_LIB_CUSTOMKERNELS_KERNELBASE_H
#define KILN_LIB_CUSTOMKERNELS_KERNELBASE_H

#include "kiln/Backend/CPU/CpuKernelImpl.h"
#include "kiln/Dialect/Kiln/IR/KernelSpec.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/CustomKernels/CheckCase.h"

#include "mlir/IR/Builders.h"

#include <string>

namespace kiln::kernel_ir {

using namespace mlir;

/// Results of kernel calls: their types, checked generically against what
/// inferResults computes from the operands.
class KernelBase : public KernelSpec, public CpuKernelImpl, public CheckableKernel {
public:
  LogicalResult verify(Operation *op, bool backward) const final;

protected:
  /// The result types a call with `op`'s operands must have; emits an error
  /// on `op` (through callError) and fails for operands it cannot take.
  virtual LogicalResult inferResults(Operation *op, bool backward,
                                     SmallVectorImpl<Type> &results) const = 0;
};

/// The NKI Library release the bindings' signatures were read from.
inline constexpr llvm::StringLiteral kNkiLibrarySource = "aws-neuron/nki-library @ d2ad3a57: ";

/// "'kiln.kernel' op (fqn 'x'): kernel 'k': " ready for the message.
InFlightDiagnostic callError(Operation *op);
/// Checks operand `index` of a call is a static tensor of `rank` (-1: any)
/// whose element type is f32 (`f32Only`) or a float; names it `name`.
LogicalResult expectTensor(Operation *op, unsigned index, StringRef name, int64_t rank,
                           bool f32Only = false);
LogicalResult expectOperandCount(Operation *op, unsigned count);
inline RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
RankedTensorType permuted(RankedTensorType type, ArrayRef<int64_t> perm);

/// [b, s, h, d] <-> [b, h, s, d] (its own inverse).
inline constexpr int64_t kSwapSeqHeads[] = {0, 2, 1, 3};
Value transposed(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm, StringAttr fqn);

/// A kiln.kernel of `spec` for `call`, with `options` (the rule's options
/// plus what the kernel takes from the replaced op).
Operation *createForward(OpBuilder &b, Location loc, const KernelSpec &spec,
                         const KernelCall &call, DictionaryAttr options, TypeRange results,
                         ValueRange operands);
/// The kiln.kernel_backward of forward call `forward`, same attributes.
Operation *createBackward(OpBuilder &b, Operation *forward, TypeRange results,
                          ValueRange operands);
/// `call.options` with `extra` added (extra wins).
DictionaryAttr mergedOptions(OpBuilder &b, const KernelCall &call,
                             ArrayRef<NamedAttribute> extra);

/// Options the CPU implementations read (the verifier made sure of them).
float floatOption(DictionaryAttr options, StringRef name);
bool flagOption(DictionaryAttr options, StringRef name);
std::optional<int64_t> intOption(DictionaryAttr options, StringRef name);

/// The value of dimension `name` in `shape` (which has every dimension).
int64_t dim(const KernelCheckShape &shape, StringRef name);

/// The check dimensions of kernels over attention heads (rope, attention),
/// and their q- or kv-shaped inputs in Kiln's [batch, seq, heads, head_dim]
/// with `heads` the named dimension ("heads" or "kv_heads").
KernelCheckShape attentionCheckShape();
RankedTensorType attentionCheckType(MLIRContext *context, const KernelCheckShape &shape,
                                    StringRef heads);

/// Registration entry points, one per kernel file.
void registerNkiRope();
void registerNkiFlashAttention();
void registerNkiRmsNorm();
void registerNkiGroupedExperts();
void registerChunkedCrossEntropy();

} // namespace kiln::kernel_ir

#endif // KILN_LIB_CUSTOMKERNELS_KERNELBASE_H
