//===- Shard.cpp - Decide how every value of @train_step is split ---------===//
//
// From the parallel layout, annotates the training step completely: the
// storage sharding of every argument and result (kiln.sharding), and for
// every op the grid axes of each of its loops (kiln.loops, from the op's
// ShardingRule) and the sharding its consumers see (kiln.shardings).
//
// Data parallelism (FSDP2 over dp_shard, replicas over dp_replicate):
//  * data inputs are split on their batch dimension over both axes;
//  * parameters and their AdamW moments are stored split on dim 0 over
//    dp_shard; compute ops read parameters whole (kiln-partition gathers
//    them), the update writes them in their storage layout;
//  * a loop follows the first operand that splits it, so activations stay
//    batch-split and reductions over the batch become partial sums;
//  * a partial sum is resolved into the layout its in-place consumer (the
//    AdamW of its parameter) needs, so every other reader (the gradient
//    norm) sees the gradient shards, as FSDP2 reduce-scatters them.
// Expert parallelism (ep, borrowed from dp_shard as torchtitan does): the
// grid splits dp_shard into [dp_shard / ep, ep]; non-expert parameters stay
// FSDP-sharded over both, batch inputs are split over both. Stacked expert
// weights are split on their expert dimension over ep for compute (never
// gathered over it) and FSDP-sharded over the rest of dp_shard. A grouped
// experts op then splits its expert loop over ep: its tokens are gathered
// over ep (an axis cannot split both the tokens and the experts they are
// summed over) and its output is a partial sum over ep, reduce-scattered
// back onto the tokens' ranks: the all-gather token dispatcher, static in
// shape and exact (Neuron's expert parallelism exchanges tokens this way).
// Tensor parallelism (tp): parameters whose
// module matches a `tp-plan` glob are split colwise (weight dim 0, the
// output features) or rowwise (dim 1, the input features) over tp; compute
// follows them, so a colwise linear's output is split on its features, the
// heads after it too, and a rowwise linear's output is a partial sum over
// tp, all-reduced before the residual add. With sequence parallelism the
// residual stream is split on its sequence over tp from the embedding on:
// colwise linears all-gather it, rowwise outputs reduce-scatter into it.
// The sharded program is the differentiated one (@train_step): collectives
// need no VJPs.
//
//===----------------------------------------------------------------------===//

#include "DifferentiatedStages.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/ParameterUses.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/GlobPattern.h"

#include <map>

namespace kiln {
#define GEN_PASS_DEF_SHARD
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct ShardPass : public kiln::impl::ShardBase<ShardPass> {
  using ShardBase::ShardBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!gridAxisNames(module).empty()) {
      module.emitError() << "kiln-shard: the module is already sharded (it has '"
                         << kGridAxesAttr << "')";
      return signalPassFailure();
    }
    if (dpReplicate < 1 || dpShard < 1 || tp < 1 || ep < 1 || pp < 1 || cp < 1) {
      module.emitError() << "kiln-shard: dp-replicate, dp-shard, tp, ep, cp and pp must be >= 1";
      return signalPassFailure();
    }
    if (dpShard % ep) {
      module.emitError() << "kiln-shard: ep=" << int64_t(ep) << " must divide dp-shard="
                         << int64_t(dpShard) << " (expert parallelism borrows dp_shard's ranks)";
      return signalPassFailure();
    }
    SmallVector<StringRef> names = {"dp_replicate", "dp_shard", "tp"};
    gridShape = {dpReplicate, dpShard, tp};
    if (ep > 1) {
      names = {"dp_replicate", "dp_shard", "ep", "tp"};
      gridShape = {dpReplicate, dpShard / ep, ep, tp};
    }
    if (cp > 1) {
      names.insert(names.end() - 1, "cp");
      gridShape.insert(gridShape.end() - 1, cp);
    }
    if (pp > 1) {
      names.insert(names.begin(), "pp");
      gridShape.insert(gridShape.begin(), pp);
    }
    if (failed(parsePlan(module)))
      return signalPassFailure();
    SmallVector<func::FuncOp> fns = stagesOrFunction(module, stages, funcName);
    if (fns.empty()) {
      if (stages)
        module.emitError() << "kiln-shard: stages=1 but no pipeline stage's @..._grad (run "
                              "kiln-autodiff pipeline-stages first)";
      else
        module.emitError() << "kiln-shard: no function @" << funcName;
      return signalPassFailure();
    }
    SmallVector<Layout> layouts;
    for (func::FuncOp fn : fns) {
      FailureOr<Layout> layout = layoutOf(fn);
      if (failed(layout))
        return signalPassFailure();
      layouts.push_back(std::move(*layout));
    }

    OpBuilder b(module.getBodyRegion());
    shard::GridOp::create(b, module.getLoc(), b.getStringAttr("grid"),
                          b.getDenseI64ArrayAttr(gridShape));
    SmallVector<Attribute> nameAttrs;
    for (StringRef name : names)
      nameAttrs.push_back(b.getStringAttr(name));
    module->setAttr(kGridAxesAttr, b.getArrayAttr(nameAttrs));
    axisNames = gridAxisNames(module);

    for (auto [fn, layout] : llvm::zip(fns, layouts))
      if (failed(layOutSequence(fn)) || failed(annotate(fn, layout)))
        return signalPassFailure();
    if (headTailChunks())
      module->setAttr(kHeadTailChunksAttr, b.getI64IntegerAttr(headTailChunks()));
    // Over every function sharded (a stage may lack a module another has).
    for (PlanEntry &entry : plan)
      if (!entry.used && tp > 1) {
        module.emitError() << "kiln-shard: tp-plan entry '" << entry.text
                           << "' matches no parameter's module";
        return signalPassFailure();
      }
  }

  enum class Style { Replicated, Colwise, Rowwise };
  struct PlanEntry {
    std::string text; ///< the glob; the pattern below refers to its bytes
    Style style;
    std::optional<llvm::GlobPattern> glob;
    bool used = false;
  };
  std::vector<PlanEntry> plan;

  LogicalResult parsePlan(ModuleOp module) {
    for (const std::string &entry : tpPlan) {
      size_t eq = entry.rfind('=');
      std::string style = eq == std::string::npos ? "" : entry.substr(eq + 1);
      if (style != "colwise" && style != "rowwise")
        return module.emitError() << "kiln-shard: tp-plan entry '" << entry
                                  << "' must be <module glob>=colwise or =rowwise";
      plan.push_back({entry.substr(0, eq), style == "colwise" ? Style::Colwise : Style::Rowwise,
                      std::nullopt});
    }
    for (PlanEntry &entry : plan) { // the texts no longer move
      auto pattern = llvm::GlobPattern::create(entry.text);
      if (!pattern) {
        std::string message = llvm::toString(pattern.takeError());
        return module.emitError() << "kiln-shard: tp-plan glob '" << entry.text
                                  << "': " << message;
      }
      entry.glob = std::move(*pattern);
    }
    return success();
  }

  /// The tensor-parallel style of a parameter: that of the first plan entry
  /// matching its path (kiln::parameterPath).
  Style styleOf(Value param) {
    if (tp == 1)
      return Style::Replicated;
    std::string module = parameterPath(param);
    for (PlanEntry &entry : plan)
      if (entry.glob->match(module)) {
        entry.used = true;
        return entry.style;
      }
    return Style::Replicated;
  }

  /// The axes of `axes` whose size is above 1 (splitting over 1 is a no-op;
  /// a negative axis is absent from the grid).
  GridAxes nonTrivial(std::initializer_list<int16_t> axes) {
    GridAxes out;
    for (int16_t a : axes)
      if (a >= 0 && gridShape[a] > 1)
        out.push_back(a);
    return out;
  }
  /// The ranks in a group over `axes`.
  int64_t degree(ArrayRef<int16_t> axes) { return gridGroupSize(gridShape, axes); }

  /// A stack of experts' weights that can split its experts: a weight
  /// operand (w1, w3, w2: the last three) of a grouped experts op, or of a
  /// kernel call in its place whose rule lets the expert loop split.
  static bool isExpertStack(Value param) {
    return llvm::any_of(parameterUses(param), [](OpOperand *use) {
      Operation *user = use->getOwner();
      auto call = dyn_cast<KernelOp>(user);
      bool experts = isa<GroupedExpertsOp>(user) ||
                     (call && call.getTarget() == GroupedExpertsOp::getOperationName());
      if (!experts || use->getOperandNumber() + 3 < user->getNumOperands())
        return false;
      ShardingRule rule = cast<ShardingRuleOpInterface>(user).getShardingRule();
      return rule.splittable[rule.operands[use->getOperandNumber()][0]];
    });
  }

  /// A parameter and the arguments stored as it is (its AdamW moments in a
  /// training step), each with the result that returns it updated.
  struct StoredParam {
    std::string key;
    unsigned arg;
    SmallVector<std::pair<unsigned, std::optional<unsigned>>> stored;
  };
  struct Layout {
    SmallVector<StoredParam> params;
    /// Data inputs and a pipeline stage's activations from other stages:
    /// split on their batch dimension.
    SmallVector<Signature::Slot> inputs;
  };

  /// The parameters and inputs of a training step, or of a forward-only
  /// function such as @loss (its parameters then stored alone, as in the
  /// step, so both read the same per-rank slices).
  FailureOr<Layout> layoutOf(func::FuncOp fn) {
    FailureOr<Signature> base = Signature::get(fn);
    if (failed(base))
      return failure();
    Layout layout;
    layout.inputs.assign(base->inputs().begin(), base->inputs().end());
    layout.inputs.append(base->activations().begin(), base->activations().end());
    if (base->state().empty()) {
      for (const Signature::Slot &p : base->params())
        layout.params.push_back({p.name, p.index, {{p.index, std::nullopt}}});
      return layout;
    }
    FailureOr<TrainStepSignature> sig = TrainStepSignature::get(fn);
    if (failed(sig))
      return failure();
    for (const TrainStepSignature::Param &p : sig->params)
      layout.params.push_back(
          {p.key, p.arg, {{p.arg, p.result}, {p.expAvgArg, p.expAvgResult},
                          {p.expAvgSqArg, p.expAvgSqResult}}});
    return layout;
  }

  /// What kiln-shard decides for one function, built up step by step.
  struct Annotation {
    DenseMap<Value, Sharding> storage; ///< how each argument is stored
    DenseMap<Value, Sharding> compute; ///< how compute ops read each parameter
    DenseMap<Value, Sharding> visible; ///< what the readers of each value see
    /// Layouts chosen for values: a gradient's update layout, the
    /// sequence-parallel residual stream.
    DenseMap<Value, Sharding> target;
    /// The chosen layouts, and through sums of partials to their operands.
    DenseMap<Value, Sharding> wanted;
    /// Parameters, and their mixed-precision casts, read as parameters.
    DenseSet<Value> params;
  };

  LogicalResult annotate(func::FuncOp fn, const Layout &sig) {
    Annotation a;
    if (failed(placeParameters(fn, sig, a)) || failed(placeInputs(fn, sig, a)))
      return failure();
    MLIRContext *context = fn.getContext();
    Block &body = fn.getBody().front();
    for (BlockArgument arg : body.getArguments())
      fn.setArgAttr(arg.getArgNumber(), kShardingAttr, a.storage[arg].toAttr(context, axisNames));
    // Compute ops read parameters in their tensor-parallel layout (gathered
    // over dp_shard); other arguments as stored.
    for (const StoredParam &p : sig.params)
      a.params.insert(body.getArgument(p.arg));
    for (BlockArgument arg : body.getArguments())
      a.visible[arg] = a.params.contains(arg) ? a.compute[arg] : a.storage[arg];
    chooseTargets(body, a);
    for (Operation &op : body.without_terminator())
      if (failed(annotateOp(op, a)))
        return failure();
    annotateResults(fn, sig, a);
    return success();
  }

  /// The grid's axes: [pp,] dp_replicate, dp_shard, [ep,] [cp,] tp.
  int16_t firstAxis() const { return pp > 1 ? 1 : 0; }
  int16_t dpReplicateAxis() const { return firstAxis(); }
  int16_t dpShardAxis() const { return firstAxis() + 1; }
  int16_t epAxis() const { return ep > 1 ? firstAxis() + 2 : -1; }
  int16_t cpAxis() const { return cp > 1 ? firstAxis() + (ep > 1 ? 3 : 2) : -1; }
  int16_t tpAxis() const { return firstAxis() + 2 + (ep > 1) + (cp > 1); }

  /// The head-tail layout's chunks (2 x cp), or 0: the natural order.
  int64_t headTailChunks() const { return cp > 1 && cpHeadTail ? 2 * cp : 0; }

  /// Context parallelism's load balancing: every op that reads positions
  /// (attention's causal mask, the rope table) reads them through the
  /// head-tail layout the data inputs arrive in. A kernel call in
  /// attention's place masks whole sequences and cannot take a split one.
  LogicalResult layOutSequence(func::FuncOp fn) {
    if (cp == 1)
      return success();
    WalkResult kernels = fn.walk([&](KernelOp call) {
      if (call.getTarget() != AttentionOp::getOperationName())
        return WalkResult::advance();
      call.emitError() << "kiln-shard: cp=" << int64_t(cp) << " but attention '" << call.getFqn()
                       << "' is the kernel '" << call.getSpec().name()
                       << "', which attends whole sequences (drop its override rule)";
      return WalkResult::interrupt();
    });
    if (kernels.wasInterrupted())
      return failure();
    int64_t chunks = headTailChunks();
    if (!chunks)
      return success();
    Builder b(fn.getContext());
    fn.walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionBackwardOp, RopeCacheOp>(op))
        op->setAttr("head_tail_chunks", b.getI64IntegerAttr(chunks));
    });
    return success();
  }

  /// Storage of every parameter (and its AdamW moments), and how compute
  /// ops read it: its tensor-parallel layout (colwise: the output features
  /// over tp, rowwise: the input features; a stack of experts' weights split
  /// on its experts over ep), with FSDP splitting dim 0 of that further over
  /// dp_shard. Other arguments start replicated.
  LogicalResult placeParameters(func::FuncOp fn, const Layout &sig, Annotation &a) {
    Block &body = fn.getBody().front();
    for (BlockArgument arg : body.getArguments())
      a.storage[arg] = Sharding::replicated(rankOf(arg));
    // FSDP over dp_shard and cp, as torchtitan folds cp into its FSDP mesh.
    GridAxes fsdp = nonTrivial({dpShardAxis(), epAxis(), cpAxis()}),
             tpAxes = nonTrivial({tpAxis()}), epAxes = nonTrivial({epAxis()}),
             expertFsdp = nonTrivial({dpShardAxis(), cpAxis()});
    for (const StoredParam &p : sig.params) {
      Value param = body.getArgument(p.arg);
      // A parameter several stages read (a tied table: the embedding in the
      // first, the output in the last) splits as the first of them splits
      // it, so every pipeline rank stores it alike and the gradients its
      // stages return add up.
      if (auto it = layoutByKey.find(p.key); it != layoutByKey.end()) {
        a.compute[param] = it->second.first;
        for (auto [index, result] : p.stored)
          if (failed(storeSharded(fn, p.key, body.getArgument(index), it->second.first,
                                  it->second.second ? expertFsdp : fsdp, a)))
            return failure();
        continue;
      }
      Sharding tpLayout = Sharding::replicated(rankOf(param));
      Style style = styleOf(param);
      if (style != Style::Replicated) {
        // The last two dimensions are [out, in]; a stack of experts' weights
        // has its expert dimension in front of them. An embedding table
        // [vocab, dim] splits as torchtitan splits nn.Embedding: rowwise on
        // the vocabulary, colwise on the features.
        bool table = llvm::any_of(parameterUses(param), [](OpOperand *use) {
          auto embedding = dyn_cast<EmbeddingOp>(use->getOwner());
          return embedding && use->getOperandNumber() ==
                                  embedding.getTableMutable().getOperandNumber();
        });
        int64_t dim = rankOf(param) - (style == Style::Colwise ? 2 : 1);
        if (table)
          dim = style == Style::Colwise ? 1 : 0;
        if (dim < 0 || cast<RankedTensorType>(param.getType()).getDimSize(dim) % tp)
          return fn.emitError() << "kiln-shard: parameter '" << p.key << "' cannot be split "
                                << (style == Style::Colwise ? "colwise" : "rowwise")
                                << " over tp=" << int64_t(tp);
        tpLayout.dims[dim] = tpAxes;
      }
      bool experts = !epAxes.empty() && isExpertStack(param);
      if (experts) {
        if (cast<RankedTensorType>(param.getType()).getDimSize(0) % ep)
          return fn.emitError() << "kiln-shard: expert stack '" << p.key
                                << "' cannot split its experts over ep=" << int64_t(ep);
        tpLayout.dims[0] = epAxes;
      }
      a.compute[param] = tpLayout;
      layoutByKey[p.key] = {tpLayout, experts};
      for (auto [index, result] : p.stored)
        if (failed(storeSharded(fn, p.key, body.getArgument(index), tpLayout,
                                experts ? expertFsdp : fsdp, a)))
          return failure();
    }
    return success();
  }

  /// `arg` (a parameter or a moment of one) stored as `tpLayout` with dim 0
  /// split further over `shardAxes` (FSDP2), padded where uneven.
  LogicalResult storeSharded(func::FuncOp fn, StringRef key, Value arg, const Sharding &tpLayout,
                             const GridAxes &shardAxes, Annotation &a) {
    Sharding &stored = a.storage[arg] = tpLayout;
    if (rankOf(arg) == 0)
      return success();
    int64_t dim0 = cast<RankedTensorType>(arg.getType()).getDimSize(0);
    int64_t tpDim0 = degree(tpLayout.dims[0]), shards = degree(shardAxes);
    if (!shardAxes.empty() && (dim0 / tpDim0) % shards) {
      // Uneven shards: FSDP2 pads dim 0 (of each tp or ep shard) to a
      // multiple of the degree. A padded split pads each block of its
      // axes but the last: FSDP over [dp_shard, ep] pads each dp_shard
      // block to a multiple of ep, so it must divide over dp_shard.
      int64_t last = degree(ArrayRef<int16_t>(shardAxes).take_back());
      int64_t outer = shards / last, block = dim0 / tpDim0;
      if (block % outer)
        return fn.emitError() << "kiln-shard: parameter '" << key << "' has " << block << " rows"
                              << (tpDim0 > 1 ? " per tp shard" : "") << ", not divisible by the "
                              << outer << " ranks of dp_shard outside its expert-parallel group";
      int64_t inner = block / outer;
      stored.paddedTo.assign(rankOf(arg), 0);
      stored.paddedTo[0] = tpDim0 * outer * ((inner + last - 1) / last * last);
    }
    stored.dims[0].append(shardAxes.begin(), shardAxes.end());
    return success();
  }

  /// Data inputs split on their batch dimension over every data-parallel
  /// axis; a pipeline stage's activations too, and under sequence
  /// parallelism on their sequence over tp as the residual stream is.
  LogicalResult placeInputs(func::FuncOp fn, const Layout &sig, Annotation &a) {
    for (const Signature::Slot &input : sig.inputs) {
      Value arg = fn.getArgument(input.index);
      int64_t rows = cast<RankedTensorType>(arg.getType()).getDimSize(0);
      if (rows % (dpReplicate * dpShard))
        return fn.emitError() << "kiln-shard: input '" << input.name << "' has " << rows
                              << " rows, not divisible by the data-parallel degree "
                              << int64_t(dpReplicate) * int64_t(dpShard);
      int64_t blocks = headTailChunks() ? headTailChunks() : int64_t(cp);
      auto type = cast<RankedTensorType>(arg.getType());
      if (cp > 1 && (type.getRank() < 2 || type.getDimSize(1) % blocks))
        return fn.emitError() << "kiln-shard: input '" << input.name << "' "
                              << (type.getRank() < 2
                                      ? std::string("has no sequence dimension")
                                      : "has a sequence of " + std::to_string(type.getDimSize(1)))
                              << ", not divisible by " << blocks << " (cp=" << int64_t(cp)
                              << (headTailChunks() ? " x 2 head-tail chunks" : "") << ")";
      a.storage[arg] =
          activationLayout(arg.getType(), fn.getArgAttr(input.index, kTransferAttr) ||
                                              fn.getArgAttr(input.index, kCotangentAttr));
    }
    return success();
  }

  /// A value of `type` split on its batch dimension over every data-parallel
  /// axis; with `crossesStages` (what a pipeline stage sends or receives) and
  /// sequence parallelism, a [batch, seq, hidden] one on its sequence over tp
  /// too: the residual stream crosses stages as the stages hold it.
  Sharding activationLayout(Type type, bool crossesStages) {
    auto tensor = cast<RankedTensorType>(type);
    Sharding s = Sharding::replicated(tensor.getRank());
    if (tensor.getRank() == 0)
      return s;
    s.dims[0] = nonTrivial({dpReplicateAxis(), dpShardAxis(), epAxis()});
    if (tensor.getRank() >= 2)
      s.dims[1] = nonTrivial({cpAxis()});
    if (crossesStages && sequenceParallel && tp > 1 && tensor.getRank() == 3 &&
        tensor.getDimSize(1) % (cp * tp) == 0)
      s.dims[1] = nonTrivial({cpAxis(), tpAxis()});
    return s;
  }

  /// The layouts chosen for values (Annotation::target) and wanted of them
  /// (Annotation::wanted).
  void chooseTargets(Block &body, Annotation &a) {
    // Partial gradients resolve into the layout their update needs.
    // Each microbatch's gradient takes it too, before it is accumulated.
    // A pipeline stage's gradients (kiln.grad results) resolve into their
    // parameter's storage, as the stage's rank updates it.
    func::FuncOp fn = cast<func::FuncOp>(body.getParentOp());
    Operation *ret = body.getTerminator();
    for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
      if (auto key = fn.getResultAttrOfType<StringAttr>(i, kGradAttr))
        for (unsigned arg = 0, n = fn.getNumArguments(); arg < n; ++arg)
          if (fn.getArgAttrOfType<StringAttr>(arg, kParamAttr) == key)
            a.target[ret->getOperand(i)] = a.storage.lookup(fn.getArgument(arg));
    for (auto adamw : body.getOps<AdamWOp>()) {
      Sharding stored = a.storage.lookup(adamw.getParam());
      for (Value grad = adamw.getGrad();;) {
        a.target[grad] = stored;
        auto sum = grad.getDefiningOp<AddOp>();
        if (!sum || !sum->hasAttr(kAccumulateAttr))
          break;
        a.target[sum.getRhs()] = stored;
        grad = sum.getLhs();
      }
    }
    // Sequence parallelism: the residual stream, from the token embedding
    // on, is split on its sequence dimension over tp; norms and residual
    // adds follow it, colwise linears gather it, rowwise ones scatter into it.
    if (sequenceParallel && tp > 1)
      for (auto embedding : body.getOps<EmbeddingOp>()) {
        if (!isa<BlockArgument>(embedding.getIds()) || rankOf(embedding.getResult()) != 3)
          continue;
        Sharding s = Sharding::replicated(3);
        s.dims[0] = nonTrivial({dpReplicateAxis(), dpShardAxis(), epAxis()});
        s.dims[1] = nonTrivial({cpAxis(), tpAxis()});
        a.target[embedding.getResult()] = s;
      }
    // Through sums of partials (a tied embedding's two gradients) to their
    // operands.
    a.wanted = a.target;
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
      if (!ruled || op.getNumResults() != 1 || !ruled.getShardingRule().sumsPartials)
        continue;
      if (auto it = a.wanted.find(op.getResult(0)); it != a.wanted.end()) {
        Sharding s = it->second;
        for (Value operand : op.getOperands())
          a.wanted.try_emplace(operand, s);
      }
    }
  }

  /// The grid axes of each loop of one op, placed step by step. An axis may
  /// split only one loop of any one tensor, and a result cannot be split
  /// over an axis it is pending a sum over (a split dimension and a
  /// reduction loop on one axis); reduction loops may share an axis (they
  /// sum together).
  struct LoopPlacement {
    const ShardingRule &rule;
    LoopSharding loops;

    explicit LoopPlacement(const ShardingRule &rule) : rule(rule), loops(rule.splittable.size()) {}

    /// Whether splitting loop `l` over `axes` breaks that rule.
    bool clashes(int64_t l, const GridAxes &axes) const {
      for (const SmallVector<int64_t> &map : rule.operands)
        if (llvm::is_contained(map, l) && usesAxis(map, l, axes))
          return true;
      for (auto [r, map] : llvm::enumerate(rule.results)) {
        ArrayRef<int64_t> reduced = r < rule.reductions.size()
                                        ? ArrayRef<int64_t>(rule.reductions[r])
                                        : ArrayRef<int64_t>();
        if (llvm::is_contained(map, l) && (usesAxis(map, l, axes) || usesAxis(reduced, l, axes)))
          return true;
        if (llvm::is_contained(reduced, l) && usesAxis(map, l, axes))
          return true;
      }
      return false;
    }

  private:
    /// Whether a loop of `map` other than `except` is split over one of `axes`.
    bool usesAxis(ArrayRef<int64_t> map, int64_t except, const GridAxes &axes) const {
      return llvm::any_of(map, [&](int64_t other) {
        return other >= 0 && other != except &&
               llvm::any_of(axes, [&](int16_t a) { return llvm::is_contained(loops[other], a); });
      });
    }
  };

  /// A result with a wanted layout (a gradient, stored as its parameter)
  /// takes its tensor-parallel split before the operands' splits are
  /// placed: those are gathered instead, as Megatron and torchtitan do (a
  /// rowwise weight's gradient from the gathered sequence-parallel output
  /// gradient and the local input features; the vocabulary-parallel
  /// embedding's gradient on the rank's rows). A loop that only a result
  /// follows (a scatter's destination) then also takes the wanted
  /// data-parallel axes where nothing clashes (FSDP2 reduce-scatters
  /// gradients, so they mostly clash).
  void followWanted(Operation &op, LoopPlacement &place, const Annotation &a,
                    bool tensorParallelOnly) {
    const ShardingRule &rule = place.rule;
    for (auto [r, map] : llvm::enumerate(rule.results)) {
      auto it = a.wanted.find(op.getResult(r));
      if (it == a.wanted.end())
        continue;
      for (auto [d, l] : llvm::enumerate(map)) {
        if (l < 0 || !rule.splittable[l] ||
            (!tensorParallelOnly && llvm::any_of(rule.operands, [&](ArrayRef<int64_t> m) {
              return llvm::is_contained(m, l);
            })))
          continue;
        ArrayRef<int16_t> want(it->second.dims[d]);
        GridAxes &loop = place.loops[l];
        if (want.take_front(loop.size()) != ArrayRef<int16_t>(loop))
          continue;
        GridAxes axes = loop;
        for (int16_t axis : want.drop_front(loop.size())) {
          GridAxes more = axes;
          more.push_back(axis);
          if ((tensorParallelOnly && axis != tpAxis()) || place.clashes(l, more))
            break;
          axes = more;
        }
        loop = axes;
      }
    }
  }

  /// Each unplaced loop follows the split of an operand of one kind: the
  /// parameters (`ofParams`), or the other operands, resolved or pending a
  /// sum (`pending`). It takes the longest leading part of the operand's
  /// split that clashes with nothing; the operand is gathered over the rest
  /// (tokens over ep, for experts split over ep).
  void followOperands(Operation &op, LoopPlacement &place, Annotation &a, bool ofParams,
                      bool pending = false) {
    const ShardingRule &rule = place.rule;
    auto tied = dyn_cast<TiedOperandOpInterface>(op);
    for (unsigned i = 0; i < op.getNumOperands(); ++i) {
      Value operand = op.getOperand(i);
      if (a.params.contains(operand) != ofParams ||
          (!ofParams && a.visible[operand].partial.empty() == pending))
        continue;
      // An op writing a parameter in place works on its storage.
      bool inPlace = tied && ofParams && i == *tied.getTiedOperand(0);
      const Sharding &s = inPlace ? a.storage[operand] : a.visible[operand];
      for (auto [d, l] : llvm::enumerate(rule.operands[i])) {
        if (l < 0 || s.dims[d].empty() || !rule.splittable[l] || !place.loops[l].empty())
          continue;
        GridAxes axes = s.dims[d];
        while (!axes.empty() && place.clashes(l, axes))
          axes.pop_back();
        place.loops[l] = axes;
      }
    }
  }

  /// kiln.loops and kiln.shardings of one op.
  LogicalResult annotateOp(Operation &op, Annotation &a) {
    auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
    if (!ruled)
      return op.emitOpError() << "has no sharding rule; kiln-shard cannot place it";
    ShardingRule rule = ruled.getShardingRule();
    LoopPlacement place(rule);
    // Parameters first: a weight's tensor-parallel split wins over an
    // activation's, which is then gathered (sequence parallelism's
    // all-gather before a colwise linear); then the wanted layouts of the
    // results, then the other operands, those pending a sum last (a sum is
    // scattered into the layout of a resolved operand rather than both
    // gathered: the experts' input gradient under expert parallelism
    // joins the router's on the tokens' ranks).
    followOperands(op, place, a, /*ofParams=*/true);
    followWanted(op, place, a, /*tensorParallelOnly=*/true);
    followOperands(op, place, a, /*ofParams=*/false);
    followOperands(op, place, a, /*ofParams=*/false, /*pending=*/true);
    followWanted(op, place, a, /*tensorParallelOnly=*/false);
    // Operands pending one sum, into an op linear in them: the sum stays
    // pending (no loop is split; kiln-partition clones the op as is).
    SmallVector<Sharding> operandShardings;
    for (Value operand : op.getOperands())
      operandShardings.push_back(a.visible[operand]);
    std::optional<Sharding> pendingSum = pendingSumThrough(rule, operandShardings);
    if (pendingSum)
      place.loops.assign(rule.splittable.size(), GridAxes());
    MLIRContext *context = op.getContext();
    SmallVector<Attribute> results;
    for (OpResult result : op.getResults()) {
      std::optional<Sharding> inherited =
          pendingSum ? pendingSum
                     : pendingSumFromOperand(rule, place.loops, operandShardings,
                                             result.getResultNumber());
      Sharding s = inherited ? *inherited
                             : producedResultSharding(rule, place.loops, result.getResultNumber());
      a.visible[result] = resolvedResult(op, result, std::move(s), a);
      results.push_back(a.visible[result].toAttr(context, axisNames));
    }
    // A parameter's mixed-precision cast is read as the parameter is: its
    // tensor-parallel split wins over activations' (kiln-partition casts
    // it again at each use).
    if (auto castOp = dyn_cast<CastOp>(op); castOp && a.params.contains(castOp.getInput()))
      a.params.insert(castOp.getResult());
    op.setAttr(kLoopShardingAttr, loopShardingToAttr(context, place.loops, axisNames));
    op.setAttr(kResultShardingAttr, ArrayAttr::get(context, results));
    return success();
  }

  /// What the readers of `result` see, given the sharding `s` its op
  /// produces: a layout chosen for the value (a gradient's update layout,
  /// the SP stream) wins; otherwise a pending sum is resolved where it
  /// stands, its splits kept, unless only sums of partials, or a single
  /// reader, read it.
  Sharding resolvedResult(Operation &op, OpResult result, Sharding s, const Annotation &a) {
    if (auto it = a.target.find(result); it != a.target.end())
      return it->second;
    if (s.partial.empty())
      return s;
    // Attention's key and value gradients, sums over the query blocks
    // (context parallelism), resolve into the layout of the keys and values
    // they differentiate: a reduce-scatter back onto the sequence shards.
    if (auto bwd = dyn_cast<AttentionBackwardOp>(op); bwd && result != bwd.getQGrad()) {
      auto primal = a.visible.find(result == bwd.getKGrad() ? bwd.getK() : bwd.getV());
      if (primal != a.visible.end() && primal->second.partial.empty())
        return primal->second;
    }
    // A single reader resolves the sum itself, into the layout its loops
    // need (a reduce-scatter into a sequence-parallel norm's shards rather
    // than an all-reduce); several readers share one resolution here.
    bool onlySums = llvm::all_of(result.getUsers(), [](Operation *user) {
      auto r = dyn_cast<ShardingRuleOpInterface>(user);
      return r && r.getShardingRule().sumsPartials;
    });
    bool oneReader = result.hasOneUse() && isa<ShardingRuleOpInterface>(*result.getUsers().begin());
    // A norm's pending part is a sum of squares, which only the norm itself
    // can resolve (kiln-partition adds them before the root): no reader may
    // take it as a plain sum (gradient accumulation's mean scales the norm).
    if (isa<GlobalNormOp>(op) || (!onlySums && !oneReader) || result.use_empty())
      s.partial.clear();
    return s;
  }

  /// Results: updated state as stored, outputs whole; a pipeline stage's
  /// gradients as their parameter is stored, the activations and cotangents
  /// it sends split on their batch dimension as it received them.
  void annotateResults(func::FuncOp fn, const Layout &sig, Annotation &a) {
    MLIRContext *context = fn.getContext();
    Operation *ret = fn.getBody().front().getTerminator();
    for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i) {
      Sharding s = Sharding::replicated(cast<RankedTensorType>(fn.getResultTypes()[i]).getRank());
      auto target = a.target.find(ret->getOperand(i));
      if (fn.getResultAttr(i, kGradAttr) && target != a.target.end())
        s = target->second;
      else if (fn.getResultAttr(i, kTransferAttr) || fn.getResultAttr(i, kCotangentAttr))
        s = activationLayout(fn.getResultTypes()[i], true);
      fn.setResultAttr(i, kShardingAttr, s.toAttr(context, axisNames));
    }
    for (const StoredParam &p : sig.params)
      for (auto [arg, result] : p.stored)
        if (result)
          fn.setResultAttr(*result, kShardingAttr,
                           a.storage[fn.getArgument(arg)].toAttr(context, axisNames));
  }

  static int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

  SmallVector<std::string> axisNames;
  SmallVector<int64_t> gridShape;
  /// Each parameter's tensor-parallel layout and whether it is an expert
  /// stack, by HF key, as the first function sharded placed it.
  std::map<std::string, std::pair<Sharding, bool>> layoutByKey;
};

} // namespace
