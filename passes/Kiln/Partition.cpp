//===- Partition.cpp - The per-rank program of an annotated @train_step ---===//
//
// Consumes kiln-shard's annotations and rebuilds the function on local
// shapes. Each op is cloned on operands brought to the sharding its rule
// needs; where a value's sharding differs from what its consumer needs, the
// difference becomes explicit `shard` collectives on the grid's axes:
//   pending sum -> split    reduce_scatter (sum)
//   pending sum -> whole    all_reduce (sum)
//   split -> whole          all_gather
//   whole -> split          all_slice (local, no communication)
// Ops whose meaning depends on the global shape get it explicitly: a mean
// over split positions divides by the global count (total_positions), and a
// norm over split tensors sums squares across ranks before the root.
//
//===----------------------------------------------------------------------===//

#include "DifferentiatedStages.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Recomputed.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <map>

namespace kiln {
#define GEN_PASS_DEF_PARTITION
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct PartitionPass : public kiln::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> fns = stagesOrFunction(module, stages, funcName);
    if (fns.empty()) {
      module.emitError() << "kiln-partition: no function @" << funcName
                         << (stages ? " (stages=1: no pipeline stage's @..._grad)" : "");
      return signalPassFailure();
    }
    axisNames = gridAxisNames(module);
    grid = module.lookupSymbol<shard::GridOp>("grid");
    for (func::FuncOp fn : fns) {
      bool annotated = fn.getNumArguments() > 0 && fn.getArgAttr(0, kShardingAttr) &&
                       llvm::all_of(fn.getBody().front().without_terminator(),
                                    [](Operation &op) { return op.hasAttr(kLoopShardingAttr); });
      if (axisNames.empty() || !grid || !annotated) {
        fn.emitError() << "kiln-partition: @" << fn.getSymName()
                       << " is not annotated for partitioning (run kiln-shard first; a "
                          "partitioned program cannot be partitioned again)";
        return signalPassFailure();
      }
      if (failed(partition(fn)))
        return signalPassFailure();
    }
  }

  //===--------------------------------------------------------------------===//
  // Shardings of values of the new function
  //===--------------------------------------------------------------------===//

  /// The sharding `attr` gives a value of `type` (replicated when none).
  FailureOr<Sharding> parse(Operation *where, Attribute attr, Type type) {
    int64_t rank = cast<RankedTensorType>(type).getRank();
    if (!attr)
      return Sharding::replicated(rank);
    return Sharding::fromAttr(attr, rank, axisNames,
                              [&] { return where->emitError() << "kiln-partition: "; });
  }

  /// The local type of a value of global `type` sharded as `s`.
  FailureOr<RankedTensorType> localType(Operation *where, Type type, const Sharding &s) {
    auto tensor = cast<RankedTensorType>(type);
    FailureOr<SmallVector<int64_t>> shape = s.localShape(tensor.getShape(), grid.getShape());
    if (failed(shape)) {
      where->emitError() << "kiln-partition: " << tensor << " does not split evenly as "
                         << s.toAttr(where->getContext(), axisNames);
      return failure();
    }
    return RankedTensorType::get(*shape, tensor.getElementType());
  }

  /// Brings `v` (sharded as `from`) to sharding `to` with collectives.
  FailureOr<Value> reshard(OpBuilder &b, Location loc, Value v, Sharding from,
                           const Sharding &to) {
    if (from == to)
      return v;
    StringRef gridName = grid.getSymName();
    Type global = globalTypes.lookup(v);
    Operation *where = b.getBlock()->getParentOp();
    auto typeFor = [&](const Sharding &s) { return localType(where, global, s); };
    StringAttr fqn = b.getStringAttr("fsdp.padding");
    // Whether `v` is pending a sum over every one of `axes`.
    auto pendingOver = [&](ArrayRef<int16_t> axes) {
      return llvm::all_of(axes, [&](int16_t a) { return llvm::is_contained(from.partial, a); });
    };
    // Reduce-scatters the pending sum over the axes `axes` adds to dimension
    // d's current split into that split.
    auto scatterInto = [&](size_t d, const GridAxes &axes) -> LogicalResult {
      GridAxes extra(axes.begin() + from.dims[d].size(), axes.end());
      Sharding next = from;
      next.dims[d] = axes;
      llvm::erase_if(next.partial, [&](int16_t a) { return llvm::is_contained(extra, a); });
      FailureOr<RankedTensorType> type = typeFor(next);
      if (failed(type))
        return failure();
      v = shard::ReduceScatterOp::create(
          b, loc, *type, FlatSymbolRefAttr::get(b.getStringAttr(gridName)),
          b.getDenseI16ArrayAttr(extra), v,
          shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
          b.getIndexAttr(d));
      from = next;
      return success();
    };
    // Uneven FSDP shards: pad each block of the split over all but the last
    // wanted axis (the whole dimension, or a tp shard) before the last axis
    // splits it (or a pending sum is scattered into it). A pending sum is
    // first scattered into those blocks (a gradient of FSDP over
    // [dp_shard, ep]: over dp_shard, padded, then over ep).
    for (size_t d = 0; d < to.dims.size(); ++d) {
      ArrayRef<int16_t> blockAxes = ArrayRef<int16_t>(to.dims[d]).drop_back();
      ArrayRef<int16_t> have(from.dims[d]);
      if (!to.padding(d) || from.padding(d) || have.size() >= blockAxes.size() ||
          blockAxes.take_front(have.size()) != have)
        continue;
      if (pendingOver(blockAxes.drop_front(have.size())) &&
          failed(scatterInto(d, GridAxes(blockAxes))))
        return failure();
    }
    for (size_t d = 0; d < to.dims.size(); ++d) {
      ArrayRef<int16_t> blockAxes = ArrayRef<int16_t>(to.dims[d]).drop_back();
      if (!to.padding(d) || from.padding(d) || ArrayRef<int16_t>(from.dims[d]) != blockAxes)
        continue;
      Sharding next = from;
      next.paddedTo.resize(to.dims.size(), 0);
      next.paddedTo[d] = to.padding(d);
      FailureOr<RankedTensorType> type = typeFor(next);
      if (failed(type))
        return failure();
      v = PadOp::create(b, loc, v, b.getI64IntegerAttr(d),
                        b.getI64IntegerAttr(type->getDimSize(d)), fqn);
      from = next;
    }
    // Pending sums: scattered into the dimensions that want them, the rest
    // reduced whole.
    if (!from.partial.empty()) {
      for (auto [d, axes] : llvm::enumerate(to.dims)) {
        // The wanted split extends this dimension's current one (a dp_shard
        // piece of a tp shard) by axes the value is pending over.
        ArrayRef<int16_t> want(axes), have(from.dims[d]);
        if (want.size() <= have.size() || want.take_front(have.size()) != have)
          continue;
        if (pendingOver(want.drop_front(have.size())) && failed(scatterInto(d, axes)))
          return failure();
      }
      if (!from.partial.empty()) {
        v = shard::AllReduceOp::create(b, loc, v, gridName, from.partial,
                                       shard::ReductionKind::Sum);
        from.partial.clear();
      }
    }
    // An axis moving from the end of one dimension's split to the end of
    // another's is one all-to-all (the dispatcher's buffer trading its token
    // chunks for its expert blocks, and back).
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t src = 0; src < to.dims.size() && !moved; ++src) {
        if (from.dims[src].empty() || from.padding(src))
          continue;
        int16_t axis = from.dims[src].back();
        if (llvm::is_contained(to.dims[src], axis))
          continue;
        for (size_t dst = 0; dst < to.dims.size() && !moved; ++dst) {
          ArrayRef<int16_t> want(to.dims[dst]), have(from.dims[dst]);
          if (dst == src || to.padding(dst) || want.size() <= have.size() ||
              want.take_front(have.size()) != have || want[have.size()] != axis)
            continue;
          Sharding next = from;
          next.dims[src].pop_back();
          next.dims[dst].push_back(axis);
          FailureOr<RankedTensorType> type = typeFor(next);
          if (failed(type))
            return failure();
          v = shard::AllToAllOp::create(b, loc, *type, gridName, {axis}, v, APInt(64, dst),
                                        APInt(64, src));
          from = next;
          moved = true;
        }
      }
    }
    // Gathers first, then slices: an axis moving from one dimension to
    // another must be gathered off the first before it splits the second.
    for (auto [d, axes] : llvm::enumerate(to.dims)) {
      ArrayRef<int16_t> want(axes), have(from.dims[d]);
      if (have.empty() || (want.size() >= have.size() && want.take_front(have.size()) == have))
        continue; // nothing to gather: the wanted split extends this one
      // Gather only the minor axes when the wanted split is a prefix of this
      // one (FSDP shards of a tensor-parallel shard).
      GridAxes keep;
      if (axes.size() < from.dims[d].size() &&
          llvm::equal(axes, ArrayRef<int16_t>(from.dims[d]).take_front(axes.size())))
        keep = axes;
      auto gatherTo = [&](const GridAxes &remaining) -> LogicalResult {
        GridAxes gathered(from.dims[d].begin() + remaining.size(), from.dims[d].end());
        Sharding next = from;
        next.dims[d] = remaining;
        FailureOr<RankedTensorType> type = typeFor(next);
        if (failed(type))
          return failure();
        v = shard::AllGatherOp::create(b, loc, *type, gridName, gathered, v, APInt(64, d));
        from = next;
        return success();
      };
      // A padded split is gathered over its last axis first: that leaves
      // each padded block whole, and the padding is dropped before the
      // blocks are gathered further (unless the target keeps it).
      if (from.padding(d) && !to.padding(d)) {
        GridAxes blockAxes(from.dims[d].begin(), from.dims[d].end() - 1);
        if (failed(gatherTo(blockAxes)))
          return failure();
        int64_t size = cast<RankedTensorType>(global).getDimSize(d) /
                       gridGroupSize(grid.getShape(), blockAxes);
        v = NarrowOp::create(b, loc, v, b.getI64IntegerAttr(d), b.getI64IntegerAttr(size), fqn);
        from.paddedTo[d] = 0;
      }
      if (from.dims[d] != keep && failed(gatherTo(keep)))
        return failure();
    }
    for (auto [d, axes] : llvm::enumerate(to.dims)) {
      if (from.dims[d] == axes)
        continue;
      GridAxes more(axes.begin() + from.dims[d].size(), axes.end());
      Sharding next = from;
      next.dims[d] = axes;
      FailureOr<RankedTensorType> type = typeFor(next);
      if (failed(type))
        return failure();
      v = shard::AllSliceOp::create(b, loc, *type, v, gridName, more, int64_t(d));
      from = next;
    }
    return v;
  }

  //===--------------------------------------------------------------------===//
  // The rewrite
  //===--------------------------------------------------------------------===//

  /// The per-rank function as it is built: each old value's local value and
  /// each local value's sharding, the parameters and their mixed-precision
  /// casts, and the resharded values later consumers reuse.
  struct RankFunction {
    DenseMap<Value, Value> local;       ///< old value -> new value
    DenseMap<Value, Sharding> sharding; ///< new value -> its sharding
    DenseSet<Value> params;             ///< old parameter arguments
    /// A parameter's mixed-precision kiln.cast is cast again at each use,
    /// from the parameter brought to that use, as FSDP2 casts the shard it
    /// all-gathers: one cast gathered once would hold the whole bf16
    /// parameter from the forward to the backward.
    DenseMap<Value, CastOp> paramCasts; ///< old cast result -> its cast
    DenseMap<std::pair<Value, Attribute>, Value> cache;
  };

  LogicalResult partition(func::FuncOp fn) {
    Block &old = fn.getBody().front();
    SmallVector<Type> argTypes, resultTypes;
    SmallVector<Sharding> argShardings, resultShardings;
    if (failed(localSignature(fn, argTypes, argShardings, resultTypes, resultShardings)))
      return failure();
    OpBuilder b(fn);
    auto rank = func::FuncOp::create(b, fn.getLoc(), fn.getName(),
                                     b.getFunctionType(argTypes, resultTypes));
    rank.setAllArgAttrs(fn.getAllArgAttrs());
    rank.setAllResultAttrs(fn.getAllResultAttrs());
    // What the function is beyond its signature (a pipeline stage's number).
    if (Attribute stage = fn->getAttr(kStageAttr))
      rank->setAttr(kStageAttr, stage);
    Block *entry = rank.addEntryBlock();
    b.setInsertionPointToStart(entry);

    RankFunction f;
    for (BlockArgument arg : old.getArguments()) {
      if (fn.getArgAttr(arg.getArgNumber(), kParamAttr))
        f.params.insert(arg);
      Value v = entry->getArgument(arg.getArgNumber());
      f.local[arg] = v;
      f.sharding[v] = argShardings[arg.getArgNumber()];
      globalTypes[v] = arg.getType();
    }
    for (auto castOp : old.getOps<CastOp>())
      if (f.params.contains(castOp.getInput()))
        f.paramCasts[castOp.getResult()] = castOp;
    for (Operation &op : old.without_terminator())
      if (failed(partitionOp(b, op, f)))
        return failure();

    auto ret = cast<func::ReturnOp>(old.getTerminator());
    SmallVector<Value> returned;
    for (auto [i, operand] : llvm::enumerate(ret.getOperands())) {
      FailureOr<Value> v = bring(b, f, operand, resultShardings[i], ret.getLoc());
      if (failed(v))
        return failure();
      returned.push_back(*v);
    }
    func::ReturnOp::create(b, ret.getLoc(), returned);
    fn.erase();
    return success();
  }

  /// The per-rank signature of `fn`: local argument and result types, from
  /// their kiln.sharding.
  LogicalResult localSignature(func::FuncOp fn, SmallVectorImpl<Type> &argTypes,
                               SmallVectorImpl<Sharding> &argShardings,
                               SmallVectorImpl<Type> &resultTypes,
                               SmallVectorImpl<Sharding> &resultShardings) {
    auto add = [&](Attribute attr, Type type, SmallVectorImpl<Type> &types,
                   SmallVectorImpl<Sharding> &shardings) -> LogicalResult {
      FailureOr<Sharding> s = parse(fn, attr, type);
      if (failed(s))
        return failure();
      FailureOr<RankedTensorType> local = localType(fn, type, *s);
      if (failed(local))
        return failure();
      shardings.push_back(*s);
      types.push_back(*local);
      return success();
    };
    for (BlockArgument arg : fn.getArguments())
      if (failed(add(fn.getArgAttr(arg.getArgNumber(), kShardingAttr), arg.getType(), argTypes,
                     argShardings)))
        return failure();
    for (auto [i, type] : llvm::enumerate(fn.getResultTypes()))
      if (failed(add(fn.getResultAttr(i, kShardingAttr), type, resultTypes, resultShardings)))
        return failure();
    return success();
  }

  /// The local value of `oldValue` in the layout `want`, resharded (and a
  /// parameter's cast cast again) where it is not. Resharded values are
  /// reused by later consumers; parameters are gathered again at each use
  /// unless they stay gathered (reshard-after-forward never), or were
  /// gathered for a recomputed op: as FSDP2 does for a checkpointed block,
  /// one gather serves the recomputation and the backward after it.
  FailureOr<Value> bring(OpBuilder &b, RankFunction &f, Value oldValue, const Sharding &want,
                         Location loc, bool forRecompute = false) {
    Value v = f.local.lookup(oldValue);
    CastOp paramCast = f.paramCasts.lookup(oldValue);
    if (f.sharding[v] == want && !paramCast)
      return v;
    bool keepGathered = reshardAfterForward == ReshardAfterForward::Never;
    bool cacheable = keepGathered || !(f.params.contains(oldValue) || paramCast) || forRecompute;
    // A parameter's cast stands for the parameter (v) in its own entries.
    auto key =
        std::make_pair(paramCast ? oldValue : v, Attribute(want.toAttr(b.getContext(), axisNames)));
    // A parameter is in the cache only if kept gathered or recomputed.
    if (Value hit = f.cache.lookup(key))
      return hit;
    FailureOr<Value> moved = v;
    if (!(f.sharding[v] == want))
      moved = reshard(b, loc, v, f.sharding[v], want);
    if (failed(moved))
      return failure();
    if (paramCast)
      moved =
          CastOp::create(b, loc, *moved, paramCast.getToAttr(), paramCast.getFqnAttr()).getResult();
    f.sharding[*moved] = want;
    // Copy before inserting: operator[] may grow the map and move the
    // entry a reference would point into (found by AddressSanitizer).
    Type globalType = globalTypes.lookup(v);
    globalTypes[*moved] = globalType;
    if (cacheable)
      f.cache[key] = *moved;
    return moved;
  }

  /// The local form of one annotated op: its operands brought to the
  /// layouts its loops need, the op emitted on them, and its results
  /// resharded to what their consumers see (kiln.shardings).
  LogicalResult partitionOp(OpBuilder &b, Operation &op, RankFunction &f) {
    if (auto castOp = dyn_cast<CastOp>(op); castOp && f.paramCasts.count(castOp.getResult())) {
      f.local[castOp.getResult()] = f.local.lookup(castOp.getInput()); // cast at each use
      return success();
    }
    ShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
    FailureOr<LoopSharding> loops = loopShardingFromAttr(op.getAttr(kLoopShardingAttr), axisNames);
    auto visible = op.getAttrOfType<ArrayAttr>(kResultShardingAttr);
    if (failed(loops) || loops->size() != rule.splittable.size() || !visible ||
        visible.size() != op.getNumResults())
      return op.emitOpError() << "kiln-partition: malformed '" << kLoopShardingAttr << "' / '"
                              << kResultShardingAttr << "' annotation";

    // Operands pending one sum pass through an op linear in them.
    SmallVector<Sharding> operandShardings;
    for (Value operand : op.getOperands())
      operandShardings.push_back(f.sharding[f.local.lookup(operand)]);
    std::optional<Sharding> pendingSum = pendingSumThrough(rule, operandShardings);

    // A loop split over a padded dimension of an operand (an uneven FSDP
    // shard) is padded alike everywhere it appears.
    DenseMap<int64_t, int64_t> loopPadding;
    for (auto [i, current] : llvm::enumerate(operandShardings)) {
      for (auto [d, l] : llvm::enumerate(rule.operands[i]))
        if (l >= 0 && current.padding(d) && current.dims[d] == (*loops)[l])
          loopPadding[l] = current.padding(d);
    }
    auto padded = [&](Sharding s, ArrayRef<int64_t> map) {
      for (auto [d, l] : llvm::enumerate(map))
        if (l >= 0 && loopPadding.count(l)) {
          s.paddedTo.resize(map.size(), 0);
          s.paddedTo[d] = loopPadding[l];
        }
      return s;
    };

    // Results pending a sum they inherit (from every operand, or from the
    // one they are linear in, which is then used as it is).
    SmallVector<std::optional<Sharding>> inherited;
    for (unsigned r = 0; r < op.getNumResults(); ++r)
      inherited.push_back(pendingSum ? pendingSum
                                     : pendingSumFromOperand(rule, *loops, operandShardings, r));
    auto keptPending = [&](unsigned i) {
      for (unsigned r = 0; r < op.getNumResults(); ++r)
        if (inherited[r] && r < rule.pendingSumFrom.size() && rule.pendingSumFrom[r] == int64_t(i))
          return true;
      return false;
    };

    SmallVector<Value> operands;
    for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
      Sharding want = pendingSum ? *pendingSum
                      : keptPending(i)
                          ? operandShardings[i]
                          : padded(requiredOperandSharding(rule, *loops, i), rule.operands[i]);
      FailureOr<Value> v = bring(b, f, operand, want, op.getLoc(), isRecomputed(&op));
      if (failed(v))
        return failure();
      operands.push_back(*v);
    }

    SmallVector<Sharding> produced;
    SmallVector<Type> types;
    for (OpResult result : op.getResults()) {
      unsigned r = result.getResultNumber();
      Sharding s = inherited[r] ? *inherited[r]
                                : padded(producedResultSharding(rule, *loops, r), rule.results[r]);
      FailureOr<RankedTensorType> type = localType(&op, result.getType(), s);
      if (failed(type))
        return failure();
      produced.push_back(s);
      types.push_back(*type);
    }

    SmallVector<Value> results;
    if (failed(emit(b, op, operands, types, *loops, produced, results)))
      return failure();
    for (auto [i, result] : llvm::enumerate(op.getResults())) {
      Value v = results[i];
      f.sharding[v] = produced[i];
      globalTypes[v] = result.getType();
      FailureOr<Sharding> want = parse(&op, visible[i], result.getType());
      if (failed(want))
        return failure();
      FailureOr<Value> seen = reshard(b, op.getLoc(), v, produced[i], *want);
      if (failed(seen))
        return failure();
      f.sharding[*seen] = *want;
      globalTypes[*seen] = result.getType();
      f.local[result] = *seen;
    }
    return success();
  }

  /// Emits the local form of `op` with `operands`, producing `types`: its
  /// clone, which adapts itself to the rank's share
  /// (ShardingRuleOpInterface::localize), except for the two ops that expand
  /// into several under a split: a norm over split tensors and a
  /// cross-entropy over a split vocabulary (loss parallel).
  LogicalResult emit(OpBuilder &b, Operation &op, ValueRange operands, TypeRange types,
                     const LoopSharding &loops, SmallVectorImpl<Sharding> &produced,
                     SmallVectorImpl<Value> &results) {
    ShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
    if (auto norm = dyn_cast<GlobalNormOp>(op); norm && anySplit(loops)) {
      results.push_back(splitNorm(b, norm, operands, rule, loops));
      produced[0] = Sharding::replicated(0);
      return success();
    }
    if (isa<CrossEntropyOp, CrossEntropyBackwardOp>(op)) {
      const GridAxes &vocab = loops[rule.operands[0].back()];
      if (!vocab.empty()) {
        results.push_back(lossParallel(b, op, operands, types[0], vocab));
        return success();
      }
    }
    Operation *clone = b.clone(op);
    clone->setOperands(operands);
    for (auto [result, type] : llvm::zip(clone->getResults(), types))
      result.setType(type);
    clone->removeAttr(kLoopShardingAttr);
    clone->removeAttr(kResultShardingAttr);
    if (failed(cast<ShardingRuleOpInterface>(op).localize(clone, loops, grid.getShape())))
      return failure();
    results.append(clone->result_begin(), clone->result_end());
    return success();
  }

  /// A norm over split tensors: local sums of squares, summed across the
  /// ranks that hold different pieces, then the root. Operands split over
  /// the same axes share one sum of squares, summed over those axes only (a
  /// tensor replicated over tp counts once).
  Value splitNorm(OpBuilder &b, GlobalNormOp norm, ValueRange operands, const ShardingRule &rule,
                  const LoopSharding &loops) {
    std::map<GridAxes, SmallVector<Value>> groups;
    for (auto [i, operand] : llvm::enumerate(operands)) {
      GridAxes axes;
      for (int64_t l : rule.operands[i])
        for (int16_t a : loops[l])
          if (!llvm::is_contained(axes, a))
            axes.push_back(a);
      llvm::sort(axes);
      groups[axes].push_back(operand);
    }
    Location loc = norm.getLoc();
    Value total;
    for (auto &[axes, group] : groups) {
      Value squares = GlobalNormOp::create(b, loc, group, norm.getFqnAttr(), b.getUnitAttr());
      if (!axes.empty())
        squares = shard::AllReduceOp::create(b, loc, squares, grid.getSymName(), axes,
                                             shard::ReductionKind::Sum);
      total =
          total ? AddOp::create(b, loc, total, squares, norm.getFqnAttr()).getResult() : squares;
    }
    return SqrtOp::create(b, loc, total, norm.getFqnAttr());
  }

  /// Loss parallel: a cross-entropy (or its backward) on logits split on the
  /// vocabulary over `vocab`, as the vocab_parallel ops around all-reduces of
  /// the rows' maxima and statistics (KilnVocabParallelOps.td). The
  /// backward reuses the forward's statistics of the same logits.
  Value lossParallel(OpBuilder &b, Operation &op, ValueRange operands, Type type,
                     const GridAxes &vocab) {
    Location loc = op.getLoc();
    auto fqn = op.getAttrOfType<StringAttr>("fqn");
    Value logits = operands[0], labels = operands[1];
    DenseI16ArrayAttr axes = b.getDenseI16ArrayAttr(vocab);
    auto [max, stats] = vocabStats.lookup(logits);
    if (!max) {
      max = VocabParallelMaxOp::create(b, loc, logits, fqn);
      max = shard::AllReduceOp::create(b, loc, max, grid.getSymName(), vocab,
                                       shard::ReductionKind::Max);
      stats = VocabParallelStatsOp::create(b, loc, logits, max, labels, axes, fqn);
      stats = shard::AllReduceOp::create(b, loc, stats, grid.getSymName(), vocab,
                                         shard::ReductionKind::Sum);
      vocabStats[logits] = {max, stats};
    }
    int64_t positions = cast<RankedTensorType>(op.getOperand(1).getType()).getNumElements();
    IntegerAttr total = b.getI64IntegerAttr(positions);
    if (isa<CrossEntropyOp>(op))
      return VocabParallelLossOp::create(b, loc, max, stats, fqn, total);
    return VocabParallelLossBackwardOp::create(b, loc, type, logits, labels, operands[2], max,
                                               stats, axes, fqn, total);
  }

  SmallVector<std::string> axisNames;
  shard::GridOp grid;
  DenseMap<Value, Type> globalTypes;
  /// Per vocabulary-split logits value: its rows' global maxima and summed
  /// statistics.
  DenseMap<Value, std::pair<Value, Value>> vocabStats;
};

} // namespace
