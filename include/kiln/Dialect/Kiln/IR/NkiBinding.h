//===- NkiBinding.h - How an NKI Library kernel takes a Kiln call -*- C++ -*-===//
//
// A kernel of the NKI Library (nkilib) is a Python function: its tensor
// arguments in signature order, some of them output buffers that its
// results alias, and keyword arguments baked into its trace. A binding
// declares, for one direction of a Kiln kernel, which of Kiln's operands
// feeds each tensor argument and which result each output buffer holds, so
// that the HLO custom call passes operands in the function's order and the
// binder on the SDK host (kernels.json, bind_kernels.py) traces the function
// with the call's shapes. docs/kernels.md lists each binding's source.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_NKIBINDING_H
#define KILN_DIALECT_KILN_IR_NKIBINDING_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace kiln {

/// How a tensor of Kiln's kernel call is laid out for the NKI function: its
/// dimensions permuted, then (lseTiles) a [b, h, s] row statistic as
/// [b, h, 128, s / 128] (row g * 128 + p at [p, g], the 128 partitions of a
/// query tile: nkilib's attention statistics), then (foldLeading) dims 0 and 1
/// merged ([b, h, ...] -> [b * h, ...]: nkilib folds heads into the batch).
/// The HLO lowering applies it with transposes and reshapes.
struct NkiTensorLayout {
  std::vector<int64_t> permutation; ///< empty: as Kiln has it
  bool lseTiles = false;
  bool foldLeading = false;

  /// The shape the function sees of a Kiln tensor of `shape`; empty when
  /// the layout cannot take it (a statistic's length not a multiple of 128).
  std::vector<int64_t> apply(llvm::ArrayRef<int64_t> shape) const;
  /// The stages on the way, which undoing the layout goes back through:
  /// `shape` permuted, then tiled (apply before the fold; empty as apply).
  std::vector<int64_t> permuted(llvm::ArrayRef<int64_t> shape) const;
  std::vector<int64_t> tiled(llvm::ArrayRef<int64_t> shape) const;
  /// The permutation that undoes `permutation`.
  std::vector<int64_t> inversePermutation() const;
};

/// One tensor parameter of the kernel function, in signature order.
struct NkiArgument {
  enum class Source {
    Operand,      ///< Kiln operand `index` of the kiln.kernel(_backward) call
    OutputBuffer, ///< a buffer the call passes in for result `index`, which aliases it
  };
  std::string name; ///< the parameter's name in the Python signature
  Source source = Source::Operand;
  unsigned index = 0;
  NkiTensorLayout layout = {};
};

/// One result of the kernel function, in order, and which Kiln result it
/// gives. Softmax statistics come as a pair (nkilib's attention_cte:
/// negated row max, reciprocal row sum) from which the lowering computes
/// Kiln's log-sum-exp: lse = -neg_max - log(sum_recip).
struct NkiResult {
  enum class Role {
    KilnResult, ///< Kiln result `kilnResult` in `layout`
    NegMax,     ///< with SumRecip: Kiln result `kilnResult`, a log-sum-exp
    SumRecip,
  };
  Role role = Role::KilnResult;
  unsigned kilnResult = 0;
  NkiTensorLayout layout = {};
};

/// A keyword taken from the kernel call's options (`scale`), not fixed.
struct NkiOption {
  std::string option;
};

/// A keyword argument of the direction (`backward=True`, `softmax_scale=`):
/// scalars are traced into the kernel, never operands.
struct NkiKeyword {
  std::string name;
  std::variant<bool, int64_t, double, std::string, NkiOption> value;
};

struct NkiBinding {
  std::string module;   ///< the import path, e.g. "nkilib.core.embeddings.rope_hf"
  std::string function; ///< the function in it, e.g. "rope_hf"
  std::vector<NkiArgument> arguments;
  std::vector<NkiKeyword> keywords;
  /// The function's results; empty: Kiln's results as they are (in the
  /// output buffers where the function takes them).
  std::vector<NkiResult> results;
  /// Where its signature was read: "repository @ commit: path".
  std::string source;

  std::string qualifiedName() const { return module + "." + function; }
};

/// Which custom-call operand feeds each of Kiln's `kilnOperands` operands
/// under `binding`: the inverse of its Operand arguments. Empty when an
/// operand is fed by no argument (a binding that drops one: refused).
std::vector<int64_t> kilnOperandPositions(const NkiBinding &binding, unsigned kilnOperands);

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_NKIBINDING_H
