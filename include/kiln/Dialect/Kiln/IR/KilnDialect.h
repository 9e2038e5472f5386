//===- KilnDialect.h - The kiln dialect -------------------------*- C++ -*-===//
#ifndef KILN_DIALECT_KILN_IR_KILNDIALECT_H
#define KILN_DIALECT_KILN_IR_KILNDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "kiln/Dialect/Kiln/IR/KilnDialect.h.inc"

namespace kiln {
// Every kiln.* attribute the dialect knows; KilnDialect verifies each one
// where it appears and rejects any other kiln.* name.

/// Argument (and @train_step result) attribute holding a parameter's Hugging
/// Face key, by which checkpoints bind ("model.layers.0.mlp.gate_proj.weight").
inline constexpr llvm::StringLiteral kParamAttr = "kiln.param";
/// Argument attribute naming a data input ("input_ids", "labels").
inline constexpr llvm::StringLiteral kInputAttr = "kiln.input";
/// Argument attribute beside kiln.input: which microbatch of the step's batch
/// the input holds (kiln-optimizer's microbatches; absent means 0). Inputs of
/// one name are unique per microbatch.
inline constexpr llvm::StringLiteral kMicrobatchAttr = "kiln.microbatch";
/// Unit attribute on the kiln.add ops by which kiln-optimizer accumulates
/// microbatches' gradients: kiln-shard brings every microbatch's gradient
/// into its update's layout before the add (FSDP2 reduce-scatters each
/// microbatch's), so the accumulators are stored as the parameters are.
inline constexpr llvm::StringLiteral kAccumulateAttr = "kiln.accumulate";
/// Argument/result attribute naming a piece of optimizer state ("step",
/// "exp_avg.<key>", "exp_avg_sq.<key>").
inline constexpr llvm::StringLiteral kStateAttr = "kiln.state";
/// Argument attribute of the entry parameter holding the rank's global id,
/// added by kiln-lower-to-hlo (always named kRankParameter).
inline constexpr llvm::StringLiteral kRankAttr = "kiln.rank";
inline constexpr llvm::StringLiteral kRankParameter = "rank";
/// Result attribute naming the parameter (HF key) a gradient belongs to.
inline constexpr llvm::StringLiteral kGradAttr = "kiln.grad";
/// Result attribute naming a reported output ("loss", "grad_norm").
inline constexpr llvm::StringLiteral kOutputAttr = "kiln.output";
/// Op attribute listing the results the backward reads (saved activations).
inline constexpr llvm::StringLiteral kSavedAttr = "kiln.saved";
/// Module attribute describing the captured model (a dictionary).
inline constexpr llvm::StringLiteral kModelAttr = "kiln.model";
/// Module attribute naming the axes of its `shard.grid`, in order
/// (["dp_replicate", "dp_shard", "tp"]).
inline constexpr llvm::StringLiteral kGridAxesAttr = "kiln.grid_axes";
/// Module attribute (kiln-shard with context parallelism's head-tail load
/// balancing): the data inputs' sequence dimension arrives in the head-tail
/// layout of this many chunks (kiln::SequenceLayout); the runtime lays each
/// row of tokens and labels out so before splitting it over cp.
inline constexpr llvm::StringLiteral kHeadTailChunksAttr = "kiln.head_tail_chunks";
/// Module attribute: compiled mode's loop nests that run on the host's
/// threads, by site (kiln-outline-loops; kiln/Passes/HloToLinalg/HostCalls.h).
inline constexpr llvm::StringLiteral kParallelLoopsAttr = "kiln.parallel_loops";
/// Pipeline parallelism (kiln-pipeline-split): the function attribute
/// `kiln.stage = s` marks stage s's function; `kiln.transfer = N` marks a
/// stage function's argument or result as value N of those that cross
/// stages (numbered in the split function's order), received from the
/// previous stage or sent to the next. Unique among a function's arguments,
/// and among its results.
inline constexpr llvm::StringLiteral kStageAttr = "kiln.stage";
inline constexpr llvm::StringLiteral kTransferAttr = "kiln.transfer";
/// On a differentiated stage (kiln-autodiff's pipeline-stages): the argument
/// taking, or the result giving, the cotangent of transfer N.
inline constexpr llvm::StringLiteral kCotangentAttr = "kiln.cotangent";
/// A stage's forward result, and its backward's argument, holding activation
/// i that the backward reads (a residual, kept per microbatch in flight).
inline constexpr llvm::StringLiteral kResidualAttr = "kiln.residual";
/// Argument/result attribute: how the value is stored across ranks (kiln::Sharding).
inline constexpr llvm::StringLiteral kShardingAttr = "kiln.sharding";
/// Op attribute: the sharding of each of its loops (ShardingRule) and of
/// each result, set by kiln-shard and consumed by kiln-partition.
inline constexpr llvm::StringLiteral kLoopShardingAttr = "kiln.loops";
inline constexpr llvm::StringLiteral kResultShardingAttr = "kiln.shardings";
} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_KILNDIALECT_H
