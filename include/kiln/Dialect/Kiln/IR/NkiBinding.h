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

#include "kiln/Support/ClosedSets.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
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

/// The tensors of nkilib's blockwise MoE form (moe_cte and its backward):
/// the pairs (token, expert) sorted into blocks of B rows, one expert a
/// block, each expert's pairs in token order over as many blocks as they
/// fill, the blocks no expert fills (N is static) given to the last expert
/// with padding rows only. The lowering computes them in the graph from a
/// grouped-experts call's operands (NkiBlockRouting).
enum class NkiRoutedTensor {
  Hidden,         ///< [T + 1, H]: the T tokens' rows, then a zero row that padding reads
  Affinities,     ///< [(T + 1) * E, 1]: token t's routing weight for expert e at t * E + e, else 0
  GateUpWeights,  ///< [E, H, 2, I]: gate and up projections stacked
  DownWeights,    ///< [E, I, H]
  TokenPositions, ///< [N * B] s32: the token of each block row, T on a padding row
  BlockExperts,   ///< [N, 1] s32: each block's expert
  OutputGrad,     ///< [T + 1, H]: the backward's cotangent rows, then a zero row
  GateUpActivations, ///< [N, 2, I, B]: gate and up per block row, a prologue's checkpoint
  DownActivations,   ///< [N, B, H]: the down projection per block row, the same
};

template <> struct ClosedSet<NkiRoutedTensor> {
  static constexpr std::array<std::string_view, 9> words{
      "hidden",        "affinities",  "gate_up_weights",     "down_weights",    "token_positions",
      "block_experts", "output_grad", "gate_up_activations", "down_activations"};
};

/// Which operands of a grouped-experts call the blockwise form is built
/// from: tokens [..., H], routing weights and expert ids [..., k], the
/// stacks gate and up [E, I, H] and down [E, H, I] (Kiln's layout), in the
/// backward the output's cotangent [..., H]; and the block size B.
struct NkiBlockRouting {
  unsigned tokens = 0, weights = 1, ids = 2, gate = 3, up = 4, down = 5;
  int64_t blockSize = 256;
  int64_t cotangent = -1; ///< the backward's: OutputGrad

  /// The operands it reads.
  std::vector<unsigned> operands() const;

  /// N: blocks enough for `pairs` pairs over `experts` experts however
  /// they route (each nonempty expert wastes at most B - 1 rows).
  static int64_t blockCount(int64_t pairs, int64_t experts, int64_t blockSize);
};

/// One tensor parameter of the kernel function, in signature order.
struct NkiArgument {
  enum class Source {
    Operand,      ///< Kiln operand `index` of the kiln.kernel(_backward) call
    OutputBuffer, ///< a buffer the call passes in for result `index`, which aliases it
    Routed,       ///< NkiRoutedTensor `index`, built by the binding's routing
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
    RoutedRows, ///< [T + 1, H] of the blockwise form: Kiln result `kilnResult`, padding row cut
    // The blockwise form's gradients, back to Kiln's results:
    RoutedAffinities, ///< [(T + 1) * E, 1]: Kiln result `kilnResult` [..., k], each pair's
    GateUpWeights,    ///< [E, H, 2, I]: Kiln results `kilnResult` (gate), + 1 (up) [E, I, H]
    DownWeights,      ///< [E, I, H]: Kiln result `kilnResult` [E, H, I]
    // A prologue's results (NkiBinding::prologue):
    Routed,    ///< NkiRoutedTensor `kilnResult`, an argument of the calls after it
    Discarded, ///< [T + 1, H], read by nothing
  };
  Role role = Role::KilnResult;
  unsigned kilnResult = 0;
  NkiTensorLayout layout = {};
};

template <> struct ClosedSet<NkiResult::Role> {
  static constexpr std::array<std::string_view, 9> words{
      "kiln_result",     "neg_max",      "sum_recip", "routed_rows", "routed_affinities",
      "gate_up_weights", "down_weights", "routed",    "discarded"};
};

/// A keyword taken from the kernel call's options (`scale`), not fixed.
struct NkiOption {
  std::string option;
};

/// A member of a Python enum class, `type` its qualified name
/// (nkilib.core.moe.moe_cte.MoECTEImplementation.shard_on_i).
struct NkiEnum {
  std::string type, member;
};

struct NkiKeyword;
/// An instance of a Python class (an nkilib spec dataclass), constructed by
/// the binder with keyword `fields`.
struct NkiObject {
  std::string type;
  std::vector<NkiKeyword> fields;
};

/// A keyword argument of the direction (`backward=True`, `softmax_scale=`):
/// scalars are traced into the kernel, never operands.
struct NkiKeyword {
  std::string name;
  std::variant<bool, int64_t, double, std::string, NkiOption, NkiEnum, NkiObject> value;
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
  /// Set where Routed arguments take the call in nkilib's blockwise MoE form.
  std::optional<NkiBlockRouting> routing = {};
  /// Calls made first, on the same routing, whose Routed results are
  /// arguments of this one (moe_cte checkpointing the activations that
  /// nkilib's MoE backward takes: Kiln's backward recomputes the forward).
  std::vector<NkiBinding> prologue = {};

  std::string qualifiedName() const { return module + "." + function; }
};

/// Which custom-call operand feeds each of Kiln's `kilnOperands` operands
/// under `binding`: the inverse of its Operand arguments. Empty when an
/// operand is fed by no argument (a binding that drops one: refused); an
/// operand the routing reads is fed by the routed arguments (-2).
std::vector<int64_t> kilnOperandPositions(const NkiBinding &binding, unsigned kilnOperands);

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_NKIBINDING_H
