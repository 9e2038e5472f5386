//===- Sharding.h - How a value is split over the device grid ----*- C++ -*-===//
//
// A value's sharding: for each tensor dimension, the grid axes it is split
// over (blocks in the order of the axes' coordinates), and the axes over which
// it is a partial sum still to be reduced (a rowwise output before its
// all-reduce, a gradient before its reduce-scatter). In IR it is a
// #kiln.sharding attribute (KilnAttrs.td) naming the axes of the module's
// `kiln.grid_axes`:
//   #kiln.sharding<[{"dp_replicate", "dp_shard"}, {}], partial = {"tp"}>
//
// Each op states how it may be split as a loop nest (ShardingRuleOpInterface):
// its loops, and which loop each operand and result dimension follows.
// Splitting a loop that a result does not follow makes that result partial.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_SHARDING_H
#define KILN_DIALECT_KILN_IR_SHARDING_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace kiln {

class ShardingAttr;

using GridAxes = llvm::SmallVector<int16_t>;

struct Sharding {
  llvm::SmallVector<GridAxes> dims; ///< per tensor dimension
  GridAxes partial;                 ///< pending-sum axes
  /// Per dimension, the size it takes once zero-padded for an uneven split
  /// (FSDP2's shards); 0: unpadded. Padding goes at the end of each block
  /// of the split over all the dimension's axes but the last, before the
  /// last axis splits it: the whole dimension when it is split over one axis
  /// (dim 0 over dp_shard), each tensor-parallel shard when split over
  /// [tp, dp_shard] (FSDP2 pads the local shard of a TP parameter).
  llvm::SmallVector<int64_t> paddedTo;

  static Sharding replicated(int64_t rank) { return {llvm::SmallVector<GridAxes>(rank), {}, {}}; }
  bool isReplicated() const;
  /// The padded size of dimension `d`, 0 when it is not padded.
  int64_t padding(size_t d) const { return d < paddedTo.size() ? paddedTo[d] : 0; }
  bool operator==(const Sharding &other) const {
    if (dims != other.dims || partial != other.partial)
      return false;
    for (size_t d = 0; d < dims.size(); ++d)
      if (padding(d) != other.padding(d))
        return false;
    return true;
  }
  bool operator!=(const Sharding &other) const { return !(*this == other); }
  /// Every axis the value is split or pending over.
  GridAxes usedAxes() const;
  /// The local shape of a tensor of `global` shape on one rank, given the
  /// grid's axis sizes; fails when a dimension does not divide evenly.
  mlir::FailureOr<llvm::SmallVector<int64_t>> localShape(llvm::ArrayRef<int64_t> global,
                                                         llvm::ArrayRef<int64_t> grid) const;

  /// The attribute form, naming axes by `axisNames`.
  ShardingAttr toAttr(mlir::MLIRContext *context, llvm::ArrayRef<std::string> axisNames) const;
  /// The sharding `attr` (a #kiln.sharding) gives a value of rank `rank` on
  /// a grid of `axisNames`; fails, with an error from `emitError`, for
  /// another attribute, another rank, an unknown axis or a padded size
  /// that does not fit.
  static mlir::FailureOr<Sharding>
  fromAttr(mlir::Attribute attr, int64_t rank, llvm::ArrayRef<std::string> axisNames,
           llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
};

/// How an op may be split: loop `l` is `splittable[l]` or must stay whole
/// (a normalisation, a causal sequence, a gathered vocabulary); each operand
/// and result dimension follows a loop (or -1: never split). `reductions[r]`
/// lists the loops result r sums over: splitting one leaves r a partial sum.
/// A loop neither followed nor summed by a result (rope's kv heads for its
/// query output) does not concern it.
struct ShardingRule {
  llvm::SmallVector<bool> splittable;
  llvm::SmallVector<llvm::SmallVector<int64_t>> operands, results, reductions;
  /// The op is linear in every operand: operands pending the same sum give
  /// a result pending it, with no collective (a sum of partial gradients).
  bool sumsPartials = false;
  /// Per result, the operand it is linear in, every other operand it reads
  /// being the same on every rank (-1 or absent: none). A pending sum of that
  /// operand then passes to the result instead of being resolved first (a
  /// kernel's backward scaling a saved partial gradient by the loss's
  /// cotangent), so it can join other partial gradients before one
  /// reduction.
  llvm::SmallVector<int64_t> pendingSumFrom;

  /// Adds a loop and returns its index.
  int64_t loop(bool canSplit = true) {
    splittable.push_back(canSplit);
    return int64_t(splittable.size()) - 1;
  }
};

/// Rules of ops that kernels of the same layout reuse (kiln.rms_norm and
/// kiln.grouped_experts, forward or backward, by the input's rank; a kernel
/// that cannot run on a block of the experts keeps them whole).
ShardingRule rmsNormShardingRule(int64_t rank, bool backward);
ShardingRule groupedExpertsShardingRule(int64_t inputRank, bool backward,
                                        bool expertParallel = true, bool blocked = false);

/// The ranks in a group over `axes` of a grid of shape `grid`: the product
/// of their sizes.
int64_t gridGroupSize(llvm::ArrayRef<int64_t> grid, llvm::ArrayRef<int16_t> axes);

/// The grid axes each loop of an op is split over (`kiln.loops`).
using LoopSharding = llvm::SmallVector<GridAxes>;

/// Whether any loop is split: the op computes a share of its work.
bool anySplit(const LoopSharding &loops);

/// The sharding an operand must have for the op to run on local shapes under
/// `loops`: its dimensions follow their loops, nothing pending.
Sharding requiredOperandSharding(const ShardingRule &rule, const LoopSharding &loops,
                                 unsigned operand);
/// The sharding the op produces for `result` under `loops`: dimensions follow
/// their loops; split loops the result sums over leave it partial.
Sharding producedResultSharding(const ShardingRule &rule, const LoopSharding &loops,
                                unsigned result);

/// When `rule` is linear in every operand (sumsPartials) and all the
/// operands pend the same sum, the sharding its results take: still pending,
/// with no loop split.
std::optional<Sharding> pendingSumThrough(const ShardingRule &rule,
                                          llvm::ArrayRef<Sharding> operands);

/// Under `loops`, the sharding result `result` takes when it inherits the
/// pending sum of its ShardingRule::pendingSumFrom operand: the one `loops`
/// produce, pending that operand's sum. Only when the operand pends a sum,
/// is otherwise laid out as `loops` need it (it is then used as it is) and
/// the result sums over no split loop itself; nullopt otherwise.
std::optional<Sharding> pendingSumFromOperand(const ShardingRule &rule, const LoopSharding &loops,
                                              llvm::ArrayRef<Sharding> operands,
                                              unsigned result);

mlir::ArrayAttr loopShardingToAttr(mlir::MLIRContext *context, const LoopSharding &loops,
                                   llvm::ArrayRef<std::string> axisNames);
mlir::FailureOr<LoopSharding> loopShardingFromAttr(mlir::Attribute attr,
                                                   llvm::ArrayRef<std::string> axisNames);

/// The grid axes of a module (`kiln.grid_axes`), empty when it has none.
llvm::SmallVector<std::string> gridAxisNames(mlir::Operation *moduleOrNested);

/// Starts an op's diagnostic ("'kiln.x' op (fqn 'a.b'): " or a kernel
/// call's), ready for the message.
using DiagnosticFn = llvm::function_ref<mlir::InFlightDiagnostic()>;

/// Grid axes an op's local work is a block of (`vocab_axes`, `expert_axes`,
/// a kernel's options): distinct, each an axis of the enclosing module's
/// grid when it has one; else reports `attrName`'s fault through `error`.
mlir::LogicalResult verifyGridAxes(mlir::Operation *op,
                                   std::optional<llvm::ArrayRef<int16_t>> axes,
                                   llvm::StringRef attrName, DiagnosticFn error);

/// A block of `localExperts` of `numExperts` experts split over grid `axes`
/// (expert parallelism), as grouped experts ops and kernel calls in their
/// place record it: axes and count together or neither, the axes verified
/// as above, the count a multiple of the block.
mlir::LogicalResult verifyExpertBlock(mlir::Operation *op,
                                      std::optional<llvm::ArrayRef<int16_t>> axes,
                                      std::optional<int64_t> numExperts, int64_t localExperts,
                                      DiagnosticFn error);

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_SHARDING_H
