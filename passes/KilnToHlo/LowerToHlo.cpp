//===- LowerToHlo.cpp - kiln-lower-to-hlo ---------------------------------===//
//
// Lowers one per-rank function (@train_step after kiln-partition) to the hlo
// dialect: kiln ops through the patterns of LowerToHlo{Forward,Backward,
// Optimizer}.cpp, upstream `shard` collectives and kernel calls here. The
// grid is row-major with the last axis fastest (DeviceGrid's rank order),
// so a collective over a set of axes runs in the groups of ranks that share
// every other coordinate, ordered by their coordinates along those axes.
// Other functions and the grid op are dropped: the module becomes the HLO
// module's entry computation.
//
//===----------------------------------------------------------------------===//

#include "LowerToHlo.h"

#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/NkiBinding.h"
#include "kiln/Dialect/Kiln/IR/Recomputed.h"
#include "kiln/Passes/KilnToHlo/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/JSON.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERTOHLO
#include "kiln/Passes/KilnToHlo/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

//===----------------------------------------------------------------------===//
// The grid
//===----------------------------------------------------------------------===//

int64_t HloLoweringState::worldSize() const {
  int64_t n = 1;
  for (int64_t s : grid)
    n *= s;
  return n;
}

DenseIntElementsAttr HloLoweringState::replicaGroups(Builder &b, ArrayRef<int16_t> axes) const {
  std::vector<int16_t> key(axes.begin(), axes.end());
  DenseIntElementsAttr &attr = groupAttrs[key];
  if (attr)
    return attr;
  std::vector<std::vector<int64_t>> groups = hlo::gridReplicaGroups(grid, axes);
  // A group of one emits no collective: no list for Neuron to count.
  if (groups.front().size() > 1)
    ++groupLists;
  std::vector<int64_t> ids;
  for (const std::vector<int64_t> &g : groups)
    ids.insert(ids.end(), g.begin(), g.end());
  auto type = RankedTensorType::get({int64_t(groups.size()), int64_t(groups.front().size())},
                                    b.getI64Type());
  attr = DenseIntElementsAttr::get(type, ArrayRef<int64_t>(ids));
  return attr;
}

Value HloLoweringState::groupIndex(HloBuilder &b, ArrayRef<int16_t> axes) const {
  std::vector<int32_t> &table = indexTables[std::vector<int16_t>(axes.begin(), axes.end())];
  if (table.empty())
    for (int64_t rank = 0, n = worldSize(); rank < n; ++rank)
      table.push_back(int32_t(hlo::gridGroupIndex(grid, axes, rank)));
  Value entry = b.dynamicSlice(b.constantI32(table), 0, rank, 1);
  return b.reshape(entry, {});
}

Value blockOffset(HloBuilder &b, HloLoweringState &state, int64_t rows,
                  std::optional<ArrayRef<int16_t>> axes) {
  if (!axes || axes->empty())
    return {};
  Value index = state.groupIndex(b, *axes);
  return b.mul(index, b.scalar(b.i32(), double(rows)));
}

VocabIds localVocabIds(HloBuilder &b, HloLoweringState &state, Value ids, int64_t rows,
                       std::optional<ArrayRef<int16_t>> axes) {
  Value ids32 = b.convert(ids, b.i32());
  Value offset = blockOffset(b, state, rows, axes);
  if (!offset)
    return {ids32, {}};
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(ids32);
  Value local = b.sub(ids32, b.broadcast(offset, shape, {}));
  Value inside = b.logicalAnd(
      b.compare(local, b.splatLike(local, 0), hlo::ComparisonDirection::GE),
      b.compare(local, b.splatLike(local, double(rows)), hlo::ComparisonDirection::LT));
  return {b.select(inside, local, b.splatLike(local, 0)), inside};
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

namespace {

std::optional<hlo::Combiner> combinerOf(shard::ReductionKind kind) {
  switch (kind) {
  case shard::ReductionKind::Sum:
  case shard::ReductionKind::Average:
    return hlo::Combiner::add;
  case shard::ReductionKind::Max:
    return hlo::Combiner::max;
  case shard::ReductionKind::Min:
    return hlo::Combiner::min;
  case shard::ReductionKind::Product:
    return hlo::Combiner::mul;
  default:
    return std::nullopt;
  }
}

/// No channel id: the collectives are cross-replica, their groups replica
/// ids (= global ranks), the one model Neuron's proven emitters use.
const IntegerAttr kCrossReplica = nullptr;

/// Members of a group along `axes`.
int64_t groupSize(DenseIntElementsAttr groups) {
  return cast<ShapedType>(groups.getType()).getDimSize(1);
}

/// A sum divided by the group size for an average.
Value averaged(HloBuilder &b, Value v, shard::ReductionKind kind, int64_t n) {
  return kind == shard::ReductionKind::Average ? b.mulScalar(v, 1.0 / double(n)) : v;
}

template <typename OpT>
FailureOr<hlo::Combiner> reductionOf(OpT op) {
  std::optional<hlo::Combiner> c = combinerOf(op.getReduction());
  if (!c)
    return op.emitOpError() << "kiln-lower-to-hlo: reduction '"
                            << shard::stringifyReductionKind(op.getReduction())
                            << "' has no HLO combiner (sum, average, max, min, product do)";
  return *c;
}

FailureOr<SmallVector<Value>> lower(shard::AllGatherOp op, shard::AllGatherOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  DenseIntElementsAttr groups = state.replicaGroups(b.builder(), op.getGridAxes());
  if (groupSize(groups) == 1)
    return one(a.getInput());
  return one(hlo::AllGatherOp::create(b.builder(), b.location(), op.getType(), a.getInput(),
                                      op.getGatherAxis().getSExtValue(), groups, kCrossReplica)
                 .getResult());
}

/// A reducing collective over `op`'s grid axes: nothing to do on a group of
/// one, else the collective `make` builds, divided by the group size for an
/// average.
template <typename OpT>
FailureOr<SmallVector<Value>>
lowerReducing(OpT op, Value input, HloBuilder &b, HloLoweringState &state,
              llvm::function_ref<Value(hlo::Combiner, DenseIntElementsAttr)> make) {
  FailureOr<hlo::Combiner> combiner = reductionOf(op);
  if (failed(combiner))
    return failure();
  DenseIntElementsAttr groups = state.replicaGroups(b.builder(), op.getGridAxes());
  int64_t n = groupSize(groups);
  if (n == 1)
    return one(input);
  return one(averaged(b, make(*combiner, groups), op.getReduction(), n));
}

FailureOr<SmallVector<Value>> lower(shard::ReduceScatterOp op, shard::ReduceScatterOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  return lowerReducing(op, a.getInput(), b, state,
                       [&](hlo::Combiner c, DenseIntElementsAttr groups) {
                         return hlo::ReduceScatterOp::create(
                                    b.builder(), b.location(), op.getType(), a.getInput(),
                                    op.getScatterAxis().getSExtValue(), c, groups,
                                    kCrossReplica)
                             .getResult();
                       });
}

FailureOr<SmallVector<Value>> lower(shard::AllReduceOp op, shard::AllReduceOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  return lowerReducing(op, a.getInput(), b, state,
                       [&](hlo::Combiner c, DenseIntElementsAttr groups) {
                         return hlo::AllReduceOp::create(b.builder(), b.location(), op.getType(),
                                                         a.getInput(), c, groups,
                                                         kCrossReplica)
                             .getResult();
                       });
}

FailureOr<SmallVector<Value>> lower(shard::AllToAllOp op, shard::AllToAllOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  DenseIntElementsAttr groups = state.replicaGroups(b.builder(), op.getGridAxes());
  int64_t n = groupSize(groups);
  if (n == 1)
    return one(a.getInput());
  int64_t split = op.getSplitAxis().getSExtValue(), concat = op.getConcatAxis().getSExtValue();
  auto exchange = [&](Value v, int64_t dim) {
    return hlo::AllToAllOp::create(b.builder(), b.location(), v.getType(), v, dim, groups,
                                   kCrossReplica)
        .getResult();
  };
  if (split == concat)
    return one(exchange(a.getInput(), split));
  // XLA's instruction splits and concatenates one dimension: as XLA's
  // builder does, the member blocks of `split` go to a leading dimension,
  // are exchanged there, and join `concat` (member-major) after.
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(a.getInput());
  int64_t rank = int64_t(shape.size());
  SmallVector<int64_t> blocks(shape);
  blocks[split] /= n;
  blocks.insert(blocks.begin() + split, n);
  SmallVector<int64_t> toFront{split};
  for (int64_t d = 0; d <= rank; ++d)
    if (d != split)
      toFront.push_back(d);
  Value received = exchange(b.transpose(b.reshape(a.getInput(), blocks), toFront), 0);
  SmallVector<int64_t> toConcat;
  for (int64_t d = 1; d <= rank; ++d) {
    if (d == concat + 1)
      toConcat.push_back(0);
    toConcat.push_back(d);
  }
  return one(b.reshape(b.transpose(received, toConcat), HloBuilder::shapeOf(op.getResult())));
}

FailureOr<SmallVector<Value>> lower(shard::AllSliceOp op, shard::AllSliceOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  // Local: this rank's block along the slice axis, at its group index.
  int64_t dim = op.getSliceAxis().getSExtValue();
  int64_t size = cast<RankedTensorType>(op.getType()).getDimSize(dim);
  if (size == HloBuilder::shapeOf(a.getInput())[dim])
    return one(a.getInput());
  Value start = b.mul(state.groupIndex(b, op.getGridAxes()), b.scalar(b.i32(), double(size)));
  return one(b.dynamicSlice(a.getInput(), dim, start, size));
}

//===----------------------------------------------------------------------===//
// Kernel calls: NKI kernels as custom calls
//===----------------------------------------------------------------------===//

llvm::json::Value toJson(Attribute attr) {
  if (auto s = dyn_cast<StringAttr>(attr))
    return s.str();
  if (auto b = dyn_cast<BoolAttr>(attr))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return i.getInt();
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (isa<UnitAttr>(attr))
    return true;
  if (auto d = dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object o;
    for (NamedAttribute n : d)
      o[n.getName().str()] = toJson(n.getValue());
    return std::move(o);
  }
  if (auto arr = dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array list;
    for (Attribute e : arr)
      list.push_back(toJson(e));
    return std::move(list);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

/// The custom-call target of a CPU-only kernel (cpu-kernels): compiled mode
/// runs its CPU implementation; no Neuron compiler knows it.
constexpr llvm::StringLiteral kCpuKernelTarget = "KilnCpuKernel";

llvm::json::Object layoutJson(const NkiTensorLayout &layout) {
  llvm::json::Object o;
  if (!layout.permutation.empty())
    o["permutation"] = llvm::json::Array(layout.permutation);
  if (layout.lseTiles)
    o["lse_tiles"] = true;
  if (layout.foldLeading)
    o["fold_leading"] = true;
  return o;
}

/// Keyword arguments as the binder passes them: scalars as they are, an
/// option's value, an enum member {"enum": class, "member": name}, an
/// object {"object": class, "fields": {...}} that the binder constructs.
llvm::json::Object keywordsJson(ArrayRef<NkiKeyword> keywords, DictionaryAttr options) {
  llvm::json::Object out;
  for (const NkiKeyword &k : keywords)
    out[k.name] = std::visit(
        [&](const auto &v) -> llvm::json::Value {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, NkiOption>)
            return toJson(options.get(v.option));
          else if constexpr (std::is_same_v<T, NkiEnum>)
            return llvm::json::Object{{"enum", v.type}, {"member", v.member}};
          else if constexpr (std::is_same_v<T, NkiObject>)
            return llvm::json::Object{{"object", v.type},
                                      {"fields", keywordsJson(v.fields, options)}};
          else
            return llvm::json::Value(v);
        },
        k.value);
  return out;
}

/// The NKI Library function a call is bound to, for the binder on the SDK
/// host (kernels.json) and Kiln's evaluator: each tensor argument in
/// signature order, fed by the custom call's operand of the same position,
/// with the layout it takes and the Kiln tensor it holds; the function's
/// results; the keywords, options resolved.
llvm::json::Object bindingJson(const NkiBinding &binding, Operation *op, DictionaryAttr options) {
  llvm::json::Array arguments;
  for (const NkiArgument &a : binding.arguments) {
    if (a.source == NkiArgument::Source::Routed) {
      arguments.push_back(llvm::json::Object{
          {"name", a.name}, {"routed", std::string(wordOf(NkiRoutedTensor(a.index)))}});
      continue;
    }
    bool buffer = a.source == NkiArgument::Source::OutputBuffer;
    Value kiln = buffer ? op->getResult(a.index) : op->getOperand(a.index);
    arguments.push_back(
        llvm::json::Object{{"name", a.name},
                           {buffer ? "output_of_result" : "kiln_operand", int64_t(a.index)},
                           {"kiln_shape", llvm::json::Array(HloBuilder::shapeOf(kiln))},
                           {"layout", layoutJson(a.layout)}});
  }
  llvm::json::Array results;
  for (const NkiResult &r : binding.results) {
    if (r.role == NkiResult::Role::Routed || r.role == NkiResult::Role::Discarded) {
      llvm::json::Object result{{"role", std::string(wordOf(r.role))}};
      if (r.role == NkiResult::Role::Routed)
        result["routed"] = std::string(wordOf(NkiRoutedTensor(r.kilnResult)));
      results.push_back(std::move(result));
      continue;
    }
    results.push_back(llvm::json::Object{
        {"role", std::string(wordOf(r.role))},
        {"kiln_result", int64_t(r.kilnResult)},
        {"kiln_shape", llvm::json::Array(HloBuilder::shapeOf(op->getResult(r.kilnResult)))},
        {"layout", layoutJson(r.layout)}});
  }
  llvm::json::Object out{{"module", binding.module},
                         {"function", binding.function},
                         {"arguments", std::move(arguments)},
                         {"results", std::move(results)},
                         {"keywords", keywordsJson(binding.keywords, options)},
                         {"source", binding.source}};
  if (const std::optional<NkiBlockRouting> &r = binding.routing)
    out["routing"] = llvm::json::Object{{"block_size", r->blockSize}};
  return out;
}

/// Kiln's `v` as the NKI function takes it (NkiTensorLayout).
Value toNkiLayout(HloBuilder &b, Value v, const NkiTensorLayout &layout) {
  if (!layout.permutation.empty())
    v = b.transpose(v, layout.permutation);
  if (layout.lseTiles) {
    ArrayRef<int64_t> s = HloBuilder::shapeOf(v);
    v = b.transpose(b.reshape(v, {s[0], s[1], s[2] / 128, 128}), {0, 1, 3, 2});
  }
  if (layout.foldLeading) {
    SmallVector<int64_t> s(HloBuilder::shapeOf(v).drop_front());
    s[0] *= HloBuilder::shapeOf(v)[0];
    v = b.reshape(v, s);
  }
  return v;
}

/// The inverse: `v`, laid out as `layout` says, back to Kiln's `shape`.
Value fromNkiLayout(HloBuilder &b, Value v, const NkiTensorLayout &layout,
                    ArrayRef<int64_t> shape) {
  if (layout.foldLeading)
    v = b.reshape(v, layout.tiled(shape));
  if (layout.lseTiles)
    v = b.reshape(b.transpose(v, {0, 1, 3, 2}), layout.permuted(shape));
  if (!layout.permutation.empty())
    v = b.transpose(v, layout.inversePermutation());
  return v;
}

/// The custom call of a kernel bound to an NKI Library function: the
/// function's tensor arguments in its order (output buffers, zeros, among
/// them), each laid out as it takes it, and Kiln's results back from the
/// function's. Appends the call's operands and, per call result, the buffer
/// operand it aliases (-1: none).
struct BoundCall {
  SmallVector<Value> operands;
  SmallVector<Type> resultTypes;
  SmallVector<int64_t> aliases;
};

/// The blockwise MoE form of a call (NkiBinding::routing): one value per
/// NkiRoutedTensor (null until made: the checkpoints come from a
/// prologue), and the rank's first expert (or null).
struct RoutedForm {
  SmallVector<Value> tensors;
  Value firstExpert;
};

/// The type of `role`'s result in the blockwise form, for the results that
/// have no Kiln result to take it from.
Type routedResultType(const NkiResult &r, const RoutedForm &form, int64_t blockSize) {
  using Routed = NkiRoutedTensor;
  auto of = [&](Routed t) { return form.tensors[size_t(t)].getType(); };
  switch (r.role) {
  case NkiResult::Role::RoutedAffinities:
    return of(Routed::Affinities);
  case NkiResult::Role::GateUpWeights:
    return of(Routed::GateUpWeights);
  case NkiResult::Role::DownWeights:
    return of(Routed::DownWeights);
  case NkiResult::Role::Discarded:
    return of(Routed::Hidden);
  case NkiResult::Role::Routed: {
    // The checkpoints: [N, 2, I, B] in the weights' dtype, [N, B, H] in down's.
    RankedTensorType down = HloBuilder::typeOf(form.tensors[size_t(Routed::DownWeights)]);
    int64_t blocks = HloBuilder::shapeOf(form.tensors[size_t(Routed::BlockExperts)])[0],
            inter = down.getDimSize(1), hidden = down.getDimSize(2);
    if (Routed(r.kilnResult) == Routed::GateUpActivations)
      return RankedTensorType::get(
          {blocks, 2, inter, blockSize},
          HloBuilder::typeOf(form.tensors[size_t(Routed::GateUpWeights)]).getElementType());
    if (Routed(r.kilnResult) == Routed::DownActivations)
      return RankedTensorType::get({blocks, blockSize, hidden}, down.getElementType());
    return Type();
  }
  default:
    return Type();
  }
}

FailureOr<BoundCall> boundCall(Operation *op, const NkiBinding &binding, ValueRange inputs,
                               const RoutedForm &form, HloBuilder &b) {
  BoundCall call;
  auto refuse = [&](const Twine &what) {
    return op->emitOpError("lower-to-hlo: ")
           << binding.qualifiedName() << " cannot take the call: " << what;
  };
  if (kilnOperandPositions(binding, unsigned(inputs.size())).empty())
    return refuse("some of its " + Twine(inputs.size()) + " operands feed no argument");
  auto nkiType = [&](Value kiln, const NkiTensorLayout &layout,
                     Type element) -> FailureOr<RankedTensorType> {
    std::vector<int64_t> shape = layout.apply(HloBuilder::shapeOf(kiln));
    if (shape.empty())
      return failure();
    return RankedTensorType::get(shape, element);
  };
  if (binding.results.empty()) {
    call.resultTypes.append(op->result_type_begin(), op->result_type_end());
  } else {
    for (const NkiResult &r : binding.results) {
      if (binding.routing && r.role != NkiResult::Role::RoutedRows) {
        Type type = routedResultType(r, form, binding.routing->blockSize);
        if (!type)
          return refuse("result role " + Twine(int(r.role)) + " is no result of its form");
        call.resultTypes.push_back(type);
        continue;
      }
      Value kiln = op->getResult(r.kilnResult);
      if (r.role == NkiResult::Role::RoutedRows) {
        // The blockwise form's rows: the tokens', then the padding row.
        RankedTensorType type = HloBuilder::typeOf(kiln);
        int64_t width = type.getShape().back();
        call.resultTypes.push_back(RankedTensorType::get({type.getNumElements() / width + 1, width},
                                                         type.getElementType()));
        continue;
      }
      FailureOr<RankedTensorType> type =
          nkiType(kiln, r.layout, HloBuilder::typeOf(kiln).getElementType());
      if (failed(type))
        return refuse("result " + Twine(r.kilnResult) + " does not fit its layout");
      call.resultTypes.push_back(*type);
    }
  }
  call.aliases.assign(call.resultTypes.size(), -1);
  for (const NkiArgument &a : binding.arguments) {
    if (a.source == NkiArgument::Source::Routed) {
      if (a.index >= form.tensors.size() || !form.tensors[a.index])
        return refuse(a.name + " is a routed tensor the binding does not route");
      call.operands.push_back(form.tensors[a.index]);
      continue;
    }
    if (a.source == NkiArgument::Source::Operand) {
      if (a.layout.apply(HloBuilder::shapeOf(inputs[a.index])).empty())
        return refuse("operand " + Twine(a.index) + " does not fit the layout of " + a.name);
      call.operands.push_back(toNkiLayout(b, inputs[a.index], a.layout));
      continue;
    }
    if (a.index >= call.resultTypes.size())
      return refuse(a.name + " is the buffer of a result the call does not have");
    call.aliases[a.index] = int64_t(call.operands.size());
    call.operands.push_back(b.splat(cast<RankedTensorType>(call.resultTypes[a.index]), 0.0));
  }
  return call;
}

/// Kiln's results from the bound call's (`binding.results`); a prologue's
/// Routed results go to `form` instead.
SmallVector<Value> kilnResults(Operation *op, const NkiBinding &binding, ValueRange inputs,
                               ValueRange results, RoutedForm &form, HloBuilder &b) {
  if (binding.results.empty())
    return SmallVector<Value>(results);
  SmallVector<Value> kiln(op->getNumResults());
  Value negMax;
  for (auto [r, value] : llvm::zip(binding.results, results)) {
    auto shape = [&, &r = r](unsigned offset = 0) {
      return HloBuilder::shapeOf(op->getResult(r.kilnResult + offset));
    };
    switch (r.role) {
    case NkiResult::Role::KilnResult:
      kiln[r.kilnResult] = fromNkiLayout(b, value, r.layout, shape());
      break;
    case NkiResult::Role::NegMax:
      negMax = value;
      break;
    case NkiResult::Role::SumRecip: {
      // lse = max + log(sum) = -neg_max - log(1 / sum).
      Value max = b.neg(negMax);
      kiln[r.kilnResult] = fromNkiLayout(b, b.sub(max, b.log(value)), r.layout, shape());
      break;
    }
    case NkiResult::Role::RoutedRows: {
      int64_t tokens = HloBuilder::shapeOf(value)[0] - 1;
      kiln[r.kilnResult] = b.reshape(b.slice(value, 0, 0, tokens), shape());
      break;
    }
    case NkiResult::Role::RoutedAffinities:
      kiln[r.kilnResult] = routedPairs(b, *binding.routing, inputs, form.firstExpert, value);
      break;
    case NkiResult::Role::GateUpWeights:
      // [E, H, 2, I]: gate at 0, up at 1, each back to [E, I, H].
      for (unsigned half : {0u, 1u}) {
        ArrayRef<int64_t> s = HloBuilder::shapeOf(value);
        Value part = b.reshape(b.slice(value, 2, half, half + 1), {s[0], s[1], s[3]});
        kiln[r.kilnResult + half] = b.transpose(part, {0, 2, 1});
      }
      break;
    case NkiResult::Role::DownWeights:
      kiln[r.kilnResult] = b.transpose(value, {0, 2, 1});
      break;
    case NkiResult::Role::Routed:
      form.tensors[r.kilnResult] = value;
      break;
    case NkiResult::Role::Discarded:
      break;
    }
  }
  return kiln;
}

template <typename OpT>
FailureOr<SmallVector<Value>> lowerKernel(OpT op, ValueRange inputs, HloBuilder &b,
                                          HloLoweringState &state, bool backward) {
  std::optional<NeuronKernel> neuron = op.getSpec().neuron();
  if (!neuron && !state.cpuKernels) // refused with a message by checkLowerable
    return failure();
  std::string kernel = neuron ? (backward ? neuron->backward : neuron->forward)
                              : op.getKernel().str();
  // The options twice: as JSON for readers, as MLIR attribute text so that
  // Kiln's HLO evaluator runs the kernel's CPU implementation with them.
  std::string optionsText;
  llvm::raw_string_ostream(optionsText) << op.getOptions();
  llvm::json::Object config{{"kernel", kernel},
                            {"kiln_kernel", op.getKernel().str()},
                            {"kiln_direction", backward ? "backward" : "forward"},
                            {"kiln_options", optionsText},
                            {"rule", op.getRule().str()},
                            {"fqn", op.getFqn().str()},
                            {"options", toJson(op.getOptions())}};
  // A kernel bound to an NKI Library function takes the function's
  // arguments in their layouts (for Neuron: a program for the CPU keeps
  // Kiln's own operands); Kiln's evaluator reads the binding back to run
  // the kernel's CPU implementation on them.
  const NkiBinding *binding = neuron && !state.cpuKernels ? neuron->binding(backward) : nullptr;
  std::optional<GridBlock> block = op.getSpec().gridBlock(op);
  auto firstRow = [&] {
    return blockOffset(b, state, block->rows, ArrayRef<int16_t>(block->axes));
  };
  // A call in nkilib's blockwise MoE form routes its pairs in the graph; a
  // block of the experts routes only its own (the first row is consumed).
  RoutedForm form;
  if (binding && binding->routing) {
    form.firstExpert = block ? firstRow() : Value();
    form.tensors = blockRouting(b, *binding->routing, inputs, form.firstExpert);
  }
  auto emit = [&](const BoundCall &call, llvm::json::Object callConfig) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::json::Value(std::move(callConfig));
    bool aliased = llvm::any_of(call.aliases, [](int64_t a) { return a >= 0; });
    return hlo::CustomCallOp::create(
        b.builder(), b.location(), call.resultTypes, call.operands,
        neuron ? neuron->customCallTarget : kCpuKernelTarget.str(), text,
        aliased ? DenseI64ArrayAttr::get(op->getContext(), call.aliases) : DenseI64ArrayAttr());
  };
  // Calls the bound one takes results of, first (each its own custom call).
  if (binding)
    for (const NkiBinding &before : binding->prologue) {
      FailureOr<BoundCall> bound = boundCall(op, before, inputs, form, b);
      if (failed(bound))
        return failure();
      llvm::json::Object prologueConfig = config;
      prologueConfig["kernel"] = before.qualifiedName();
      prologueConfig["nki"] = bindingJson(before, op, op.getOptions());
      auto custom = emit(*bound, std::move(prologueConfig));
      kilnResults(op, before, inputs, custom.getResults(), form, b);
    }
  BoundCall call;
  if (binding) {
    FailureOr<BoundCall> bound = boundCall(op, *binding, inputs, form, b);
    if (failed(bound))
      return failure();
    call = std::move(*bound);
    config["nki"] = bindingJson(*binding, op, op.getOptions());
  } else {
    call.operands.append(inputs.begin(), inputs.end());
    call.resultTypes.append(op->result_type_begin(), op->result_type_end());
  }
  // A call on a block of a split also takes the block's first row, from the
  // rank parameter (KernelSpec::gridBlock), after the others.
  if (block && !(binding && binding->routing))
    call.operands.push_back(firstRow());
  auto custom = emit(call, std::move(config));
  if (!binding)
    return SmallVector<Value>(custom.getResults());
  return kilnResults(op, *binding, inputs, custom.getResults(), form, b);
}

FailureOr<SmallVector<Value>> lower(KernelOp op, KernelOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &state) {
  return lowerKernel(op, a.getInputs(), b, state, false);
}
FailureOr<SmallVector<Value>> lower(KernelBackwardOp op, KernelBackwardOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  return lowerKernel(op, a.getInputs(), b, state, true);
}

} // namespace

void populateCollectivesAndKernelsToHlo(RewritePatternSet &patterns, HloLoweringState &state) {
  addHloLowering<shard::AllGatherOp>(patterns, state, lower);
  addHloLowering<shard::ReduceScatterOp>(patterns, state, lower);
  addHloLowering<shard::AllReduceOp>(patterns, state, lower);
  addHloLowering<shard::AllSliceOp>(patterns, state, lower);
  addHloLowering<shard::AllToAllOp>(patterns, state, lower);
  addHloLowering<KernelOp>(patterns, state, lower);
  addHloLowering<KernelBackwardOp>(patterns, state, lower);
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

/// The kernel of a kernel call that has no Neuron custom call (CPU only).
const KernelSpec *cpuOnlyKernel(Operation *op) {
  const KernelSpec *spec = nullptr;
  if (auto call = dyn_cast<KernelOp>(op))
    spec = &call.getSpec();
  else if (auto call = dyn_cast<KernelBackwardOp>(op))
    spec = &call.getSpec();
  return spec && !spec->neuron() ? spec : nullptr;
}

/// A type the hlo dialect's tensors take (Hlo_Tensor).
bool isHloTensor(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return false;
  Type e = t.getElementType();
  return e.isF32() || e.isBF16() || e.isF16() || e.isInteger(1) || e.isSignlessInteger(32) ||
         e.isSignlessInteger(64) || e.isUnsignedInteger(32);
}

/// The latest tensor value computed before `op` (the nearest earlier op's
/// first hlo-tensor result other than `except`), null if none: a point in
/// the program a barrier can tie what follows to.
Value latestValueBefore(Operation *op, Value except = Value()) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode())
    for (Value v : prev->getResults())
      if (isHloTensor(v.getType()) && v != except)
        return v;
  return Value();
}

/// The layer of a recomputed op: its fqn up to the layer index
/// ("layers.3"), "" without one.
StringRef layerKey(Operation *op) {
  auto fqn = op->getAttrOfType<StringAttr>("fqn");
  if (!fqn || !fqn.getValue().starts_with("layers."))
    return "";
  StringRef rest = fqn.getValue().drop_front(7);
  return fqn.getValue().take_front(7 + rest.find('.'));
}

/// Puts one hlo.opt_barrier before each layer's recomputation.
///
/// kiln-activation-checkpoint clones a layer's ops right before its first
/// backward op (kiln.recomputed); kiln-partition may put reshards (e.g. a
/// parameter's all-gather) between the clones, so the recomputation is the
/// span from a layer's first recomputed op to its last. Its values from
/// outside the span (saved activations, parameters) go through the barrier,
/// together with a value the backward has computed by then: the latest one
/// the ops reading the recomputation read besides it (the cotangent the
/// layer's backward starts from). Without it, CSE (MLIR's below, XLA's) would merge each clone
/// with the forward op it copies, and XLA's scheduler could hoist it into
/// the forward: either way the activations would live through the step.
///
/// This runs on the kiln IR, before the conversion: the marks and layer
/// fqns are on the kiln ops, which the conversion replaces, and the barrier,
/// an hlo op on plain tensors, is legal as it is (the conversion rewires its
/// operands to the lowered values).
void insertRecomputeBarriers(func::FuncOp func) {
  Block &body = func.getBody().front();
  llvm::MapVector<StringRef, std::pair<Operation *, Operation *>> spans;
  for (Operation &op : body.without_terminator())
    if (isRecomputed(&op)) {
      auto it = spans.try_emplace(layerKey(&op), &op, &op).first;
      it->second.second = &op;
    }
  for (auto &[layer, span] : spans) {
    auto [first, last] = span;
    SmallVector<Operation *> ops;
    for (Operation *op = first;; op = op->getNextNode()) {
      ops.push_back(op);
      if (op == last)
        break;
    }
    llvm::DenseSet<Operation *> inSpan(ops.begin(), ops.end());
    llvm::SetVector<Value> held;
    for (Operation *op : ops)
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && (inSpan.contains(def) || def->hasTrait<OpTrait::ConstantLike>()))
          continue;
        if (isHloTensor(v.getType()))
          held.insert(v);
      }
    if (held.empty())
      continue;
    // The anchor: of the values computed before the span that an op reading
    // the recomputation also reads, the latest (not an argument or constant).
    Value anchor;
    for (Operation *op = last->getNextNode(); op; op = op->getNextNode()) {
      if (llvm::none_of(op->getOperands(), [&](Value v) {
            return v.getDefiningOp() && inSpan.contains(v.getDefiningOp());
          }))
        continue;
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && !inSpan.contains(def) && def->isBeforeInBlock(first) &&
            !def->hasTrait<OpTrait::ConstantLike>() && isHloTensor(v.getType()) &&
            (!anchor || anchor.getDefiningOp()->isBeforeInBlock(def)))
          anchor = v;
      }
    }
    // Else the op right before the span: the backward runs up to it.
    if (!anchor)
      anchor = latestValueBefore(first);
    if (anchor)
      held.insert(anchor);
    OpBuilder b(first);
    SmallVector<Value> operands = held.takeVector();
    auto barrier = hlo::OptBarrierOp::create(
        b, NameLoc::get(b.getStringAttr(layer.empty() ? "recompute" : layer + ".recompute"),
                        first->getLoc()),
        ValueRange(operands).getTypes(), operands);
    for (auto [v, r] : llvm::zip(operands, barrier.getResults()))
      v.replaceUsesWithIf(r, [&](OpOperand &use) { return inSpan.contains(use.getOwner()); });
  }
}

/// The name (HLO metadata op_name) of a re-gather's barrier; a
/// recomputation's is "<layer>.recompute".
constexpr StringLiteral kRegatherBarrier = "regather";

/// Puts one hlo.opt_barrier before each re-gather of a value already
/// all-gathered (FSDP's gather for the backward after resharding after the
/// forward).
///
/// Cross-replica collectives carry no channel id, so two all-gathers of
/// the same shard over the same groups are identical instructions: CSE
/// (MLIR's below, XLA's in neuronx-cc) would merge them and keep the whole
/// parameter live from the forward to the backward, the memory
/// reshard-after-forward saves. The re-gather reads the shard through a
/// barrier that also holds the value computed right before it (a point in
/// the backward), as torch-xla's FSDP does, so it is neither merged nor
/// hoisted.
void insertRegatherBarriers(func::FuncOp func) {
  Block &body = func.getBody().front();
  llvm::DenseSet<std::pair<Value, Attribute>> gathered;
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    auto gather = dyn_cast<shard::AllGatherOp>(&op);
    if (!gather)
      continue;
    // The same operand over the same axes along the same dimension.
    Attribute key = ArrayAttr::get(
        func.getContext(), {gather.getGridAxesAttr(), gather.getGatherAxisAttr()});
    if (gathered.insert({gather.getInput(), key}).second)
      continue;
    SmallVector<Value> held{gather.getInput()};
    if (Value anchor = latestValueBefore(gather, gather.getInput()))
      held.push_back(anchor);
    OpBuilder b(gather);
    auto barrier = hlo::OptBarrierOp::create(
        b, NameLoc::get(b.getStringAttr(kRegatherBarrier), gather.getLoc()),
        ValueRange(held).getTypes(), held);
    gather.getInputMutable().assign(barrier.getResult(0));
  }
}

struct LowerToHloPass : impl::LowerToHloBase<LowerToHloPass> {
  using LowerToHloBase::LowerToHloBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(funcName);
    if (!func) {
      module.emitError() << "kiln-lower-to-hlo: no function @" << funcName << " to lower";
      return signalPassFailure();
    }
    std::vector<int64_t> grid{1};
    SmallVector<shard::GridOp> grids(module.getOps<shard::GridOp>());
    if (!grids.empty())
      grid.assign(grids.front().getShape().begin(), grids.front().getShape().end());
    // The rank comes in as the last entry parameter, fed per rank: Neuron's
    // proven flows pass it so (NxD's SPMDRank) rather than reading replica-id.
    OpBuilder builder(&getContext());
    if (failed(func.insertArgument(
            func.getNumArguments(), RankedTensorType::get({}, builder.getI32Type()),
            builder.getDictionaryAttr(
                builder.getNamedAttr(kRankAttr, builder.getStringAttr(kRankParameter))),
            func.getLoc())))
      return signalPassFailure();
    HloLoweringState state(grid, func.getArguments().back());
    state.cpuKernels = cpuKernels;

    RewritePatternSet patterns(&getContext());
    populateForwardToHlo(patterns, state);
    populateBackwardToHlo(patterns, state);
    populateLossAndOptimizerToHlo(patterns, state);
    populateCollectivesAndKernelsToHlo(patterns, state);
    populateMoeToHlo(patterns, state);
    populateExpertDispatchToHlo(patterns, state);
    if (failed(checkLowerable(func, patterns)))
      return signalPassFailure();
    insertRecomputeBarriers(func);
    insertRegatherBarriers(func);

    ConversionTarget target(getContext());
    target.addLegalDialect<hlo::HloDialect, func::FuncDialect>();
    target.addIllegalDialect<KilnDialect, shard::ShardDialect>();
    if (failed(applyPartialConversion(func, target, std::move(patterns))))
      return signalPassFailure();

    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (&op != func.getOperation())
        op.erase();
    Builder b(&getContext());
    module->setAttr("hlo.replica_count", b.getI64IntegerAttr(state.worldSize()));
    module->setAttr("hlo.distinct_replica_groups",
                    b.getI64IntegerAttr(int64_t(state.distinctGroupLists())));
  }

  /// Every op of `func` has a lowering, or an error names the first of each
  /// kind that does not (with its fqn), and every CPU-only kernel call.
  LogicalResult checkLowerable(func::FuncOp func, RewritePatternSet &patterns) {
    llvm::DenseSet<OperationName> lowered;
    for (const std::unique_ptr<RewritePattern> &p : patterns.getNativePatterns())
      if (std::optional<OperationName> root = p->getRootKind())
        lowered.insert(*root);
    LogicalResult result = success();
    llvm::DenseSet<OperationName> reported;
    func.walk([&](Operation *op) {
      if (isa<func::FuncOp, func::ReturnOp>(op) || isa<hlo::HloDialect>(op->getDialect()))
        return;
      auto fqn = op->getAttrOfType<StringAttr>("fqn");
      StringRef module = fqn ? fqn.getValue() : "?";
      if (const KernelSpec *spec = cpuKernels ? nullptr : cpuOnlyKernel(op)) {
        op->emitError() << "kiln-lower-to-hlo: kernel '" << spec->name() << "' (rule '"
                        << op->getAttrOfType<StringAttr>("rule").getValue() << "', fqn '"
                        << module << "') has no Neuron custom call: it runs on the CPU only";
        result = failure();
        return;
      }
      if (lowered.contains(op->getName()) || !reported.insert(op->getName()).second)
        return;
      op->emitError() << "kiln-lower-to-hlo: no HLO lowering for '" << op->getName()
                      << "' (fqn '" << module << "') yet";
      result = failure();
    });
    return result;
  }
};

} // namespace
} // namespace kiln
