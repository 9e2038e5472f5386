//===- LowerToHlo.h - kiln-lower-to-hlo's patterns ---------------*- C++ -*-===//
//
// Shared by the files of kiln-lower-to-hlo: the per-module state the
// lowerings read (the device grid, channel ids), and one conversion pattern
// template that runs an op's lowering function. Each file lowers one group
// of ops (forward, backward, loss and optimizer, collectives and kernels)
// and adds its patterns with populate*.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_LOWERTOHLO_H
#define KILN_PASSES_LOWERTOHLO_H

#include "HloBuilder.h"

#include "kiln/Support/SequenceLayout.h"

#include "mlir/Transforms/DialectConversion.h"

#include <optional>
#include <map>
#include <vector>

namespace kiln {

/// What every lowering of one module shares: the grid the per-rank program
/// runs on (row-major, last axis fastest; one rank when there is none) and
/// the entry parameter holding this rank's global id (s32 scalar).
class HloLoweringState {
public:
  HloLoweringState(std::vector<int64_t> gridShape, mlir::Value rank)
      : grid(std::move(gridShape)), rank(rank) {}

  /// kiln-lower-to-hlo's cpu-kernels: CPU-only kernels become KilnCpuKernel
  /// custom calls (compiled mode) instead of errors.
  bool cpuKernels = false;

  int64_t worldSize() const;
  /// The replica groups of a collective over `axes`: `[groups, size]` global
  /// rank ids, members ordered by their coordinates along `axes` (DeviceGrid's
  /// communicator order).
  mlir::DenseIntElementsAttr replicaGroups(mlir::Builder &b, llvm::ArrayRef<int16_t> axes) const;
  /// This rank's index within its group along `axes`, as an s32 scalar
  /// (a table of every rank's index read at the rank parameter).
  mlir::Value groupIndex(HloBuilder &b, llvm::ArrayRef<int16_t> axes) const;
  /// Distinct replica-group lists used so far (a NEFF's communicators).
  size_t distinctGroupLists() const { return groupLists; }

private:
  std::vector<int64_t> grid;
  mlir::Value rank;
  // By axes, built once: each lists every rank, and a step has a thousand
  // collectives over a few sets of axes.
  mutable std::map<std::vector<int16_t>, mlir::DenseIntElementsAttr> groupAttrs;
  mutable std::map<std::vector<int16_t>, std::vector<int32_t>> indexTables;
  mutable size_t groupLists = 0;
};

template <typename OpT>
using HloLowerFn = mlir::FailureOr<llvm::SmallVector<mlir::Value>> (*)(
    OpT, typename OpT::Adaptor, HloBuilder &, HloLoweringState &);

/// Replaces an op by the values its lowering function builds.
template <typename OpT> struct LowerToHloPattern : mlir::OpConversionPattern<OpT> {
  LowerToHloPattern(mlir::MLIRContext *context, HloLoweringState &state, HloLowerFn<OpT> fn)
      : mlir::OpConversionPattern<OpT>(context), state(state), fn(fn) {}

  mlir::LogicalResult
  matchAndRewrite(OpT op, typename OpT::Adaptor adaptor,
                  mlir::ConversionPatternRewriter &rewriter) const override {
    HloBuilder b(rewriter, op.getLoc());
    mlir::FailureOr<llvm::SmallVector<mlir::Value>> results = fn(op, adaptor, b, state);
    if (mlir::failed(results))
      return mlir::failure();
    rewriter.replaceOp(op, *results);
    return mlir::success();
  }

  HloLoweringState &state;
  HloLowerFn<OpT> fn;
};

template <typename OpT>
void addHloLowering(mlir::RewritePatternSet &patterns, HloLoweringState &state,
                    HloLowerFn<OpT> fn) {
  patterns.add<LowerToHloPattern<OpT>>(patterns.getContext(), state, fn);
}

/// Token ids as s32 indices into a table of `rows` rows; with vocabulary
/// axes, relative to this rank's block (index along the axes times `rows`)
/// and `inside` the mask of the ids the block holds (null otherwise), the
/// outside ones set to row 0.
struct VocabIds {
  mlir::Value ids, inside;
};
VocabIds localVocabIds(HloBuilder &b, HloLoweringState &state, mlir::Value ids, int64_t rows,
                       std::optional<llvm::ArrayRef<int16_t>> axes);
/// This rank's first row of anything split over `axes` in blocks of `rows`
/// (a vocabulary, a stack of experts, a kernel's grid block): an s32
/// scalar, or null without axes.
mlir::Value blockOffset(HloBuilder &b, HloLoweringState &state, int64_t rows,
                        std::optional<llvm::ArrayRef<int16_t>> axes);

/// Attention's grouped layout: q [b, s, heads, d] as [b, kv, group, s, d].
struct AttentionLayout {
  int64_t batch, seq, heads, kvHeads, group, headDim;
  static AttentionLayout of(mlir::Value q, mlir::Value k);
  mlir::Value toGroups(HloBuilder &b, mlir::Value x) const;
  mlir::Value fromGroups(HloBuilder &b, mlir::Value x) const;
  /// scale * q k^T: [b, kv, group, s_q, s_k].
  mlir::Value scores(HloBuilder &b, mlir::Value qGroups, mlir::Value k, double scale) const;
};
/// Query position >= key position over the last two dimensions [s_q, s_k] of
/// `scoresShape`: the queries are the rank's block along `queryAxes` of the
/// keys' sequence (context parallelism), the sequence laid out as `layout`.
mlir::Value causalMask(HloBuilder &b, HloLoweringState &state, llvm::ArrayRef<int64_t> scoresShape,
                       std::optional<llvm::ArrayRef<int16_t>> queryAxes, SequenceLayout layout);
/// rsqrt(mean(x^2, -1) + eps): [rows].
mlir::Value rmsInverse(HloBuilder &b, mlir::Value x, double eps);
/// RoPE's rotation of x [b, s, heads, d] by cache [s, 2d], or its transpose.
mlir::Value rotate(HloBuilder &b, mlir::Value x, mlir::Value cache, bool transpose);

/// Every dimension of `v` but the last (its rows, to sum a per-row value over).
llvm::SmallVector<int64_t> leadingDims(mlir::Value v);
/// silu(gate) * up, and its gradients (d gate, d up) for the output's dy.
mlir::Value swiglu(HloBuilder &b, mlir::Value gate, mlir::Value up);
std::pair<mlir::Value, mlir::Value> swigluGrads(HloBuilder &b, mlir::Value dy, mlir::Value gate,
                                                mlir::Value up);

/// The exclusive prefix sum of m [chunks, L, G] (f32) along L, as
/// triangular matmuls (LowerToHloExpertDispatch.cpp says why).
mlir::Value exclusiveCumsum(HloBuilder &b, mlir::Value m);

struct NkiBlockRouting;
/// nkilib's blockwise MoE form of a grouped-experts call with operands
/// `inputs` (NkiBlockRouting, NkiRoutedTensor): one value per
/// NkiRoutedTensor, in its order. `firstExpert` (s32 scalar, or null) is the
/// first expert of the rank's block of the stacks; pairs routed outside it
/// are left out.
llvm::SmallVector<mlir::Value> blockRouting(HloBuilder &b, const NkiBlockRouting &routing,
                                            mlir::ValueRange inputs, mlir::Value firstExpert);
/// The entry of each pair (token t, expert id e) of the call's ids in
/// `affinities` [(T + 1) * E, 1] (a gradient in the blockwise form), at
/// t * E + e - first; 0 for pairs outside the rank's block: [..., k].
mlir::Value routedPairs(HloBuilder &b, const NkiBlockRouting &routing, mlir::ValueRange inputs,
                        mlir::Value firstExpert, mlir::Value affinities);

/// One value: the usual result of a lowering.
inline llvm::SmallVector<mlir::Value> one(mlir::Value v) { return {v}; }

void populateForwardToHlo(mlir::RewritePatternSet &patterns, HloLoweringState &state);
void populateBackwardToHlo(mlir::RewritePatternSet &patterns, HloLoweringState &state);
void populateLossAndOptimizerToHlo(mlir::RewritePatternSet &patterns, HloLoweringState &state);
void populateCollectivesAndKernelsToHlo(mlir::RewritePatternSet &patterns,
                                        HloLoweringState &state);
void populateMoeToHlo(mlir::RewritePatternSet &patterns, HloLoweringState &state);
void populateExpertDispatchToHlo(mlir::RewritePatternSet &patterns, HloLoweringState &state);

} // namespace kiln

#endif // KILN_PASSES_LOWERTOHLO_H
