//===- Sharding.cpp - How a value is split over the device grid -----------===//

#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace kiln {

bool Sharding::isReplicated() const {
  return partial.empty() &&
         llvm::all_of(dims, [](const GridAxes &axes) { return axes.empty(); }) &&
         llvm::all_of(paddedTo, [](int64_t p) { return p == 0; });
}

GridAxes Sharding::usedAxes() const {
  GridAxes used(partial);
  for (const GridAxes &axes : dims)
    used.append(axes.begin(), axes.end());
  return used;
}

int64_t gridGroupSize(ArrayRef<int64_t> grid, ArrayRef<int16_t> axes) {
  int64_t n = 1;
  for (int16_t a : axes)
    n *= grid[a];
  return n;
}

FailureOr<SmallVector<int64_t>> Sharding::localShape(ArrayRef<int64_t> global,
                                                     ArrayRef<int64_t> grid) const {
  SmallVector<int64_t> local(global);
  for (auto [d, axes] : llvm::enumerate(dims)) {
    if (int64_t padded = padding(d)) {
      if (padded < local[d])
        return failure();
      local[d] = padded;
    }
    int64_t n = gridGroupSize(grid, axes);
    if (local[d] % n)
      return failure();
    local[d] /= n;
  }
  return local;
}

ShardingAttr Sharding::toAttr(MLIRContext *context, ArrayRef<std::string> axisNames) const {
  Builder b(context);
  auto names = [&](const GridAxes &axes) {
    SmallVector<Attribute> out;
    for (int16_t a : axes)
      out.push_back(b.getStringAttr(axisNames[a]));
    return b.getArrayAttr(out);
  };
  SmallVector<Attribute> perDim;
  for (const GridAxes &axes : dims)
    perDim.push_back(names(axes));
  ArrayRef<int64_t> padded;
  if (llvm::any_of(paddedTo, [](int64_t p) { return p != 0; }))
    padded = paddedTo;
  return ShardingAttr::get(context, b.getArrayAttr(perDim), names(partial),
                           b.getDenseI64ArrayAttr(padded));
}

FailureOr<Sharding> Sharding::fromAttr(Attribute attr, int64_t rank,
                                       ArrayRef<std::string> axisNames,
                                       function_ref<InFlightDiagnostic()> emitError) {
  auto sharding = dyn_cast<ShardingAttr>(attr);
  if (!sharding)
    return emitError() << "a sharding must be a #kiln.sharding<...>, got " << attr;
  if (int64_t(sharding.getDims().size()) != rank)
    return emitError() << attr << " lists " << sharding.getDims().size()
                       << " dimensions, the value has " << rank;
  auto axesOf = [&](ArrayAttr names, GridAxes &out) -> LogicalResult {
    for (auto name : names.getAsRange<StringAttr>()) {
      const auto *it = llvm::find(axisNames, name.str());
      if (it == axisNames.end())
        return emitError() << "unknown grid axis '" << name.str()
                           << "' (the grid's: " << llvm::join(axisNames, ", ") << ")";
      out.push_back(int16_t(it - axisNames.begin()));
    }
    return success();
  };
  Sharding s = replicated(rank);
  for (auto [d, names] : llvm::enumerate(sharding.getDims().getAsRange<ArrayAttr>()))
    if (failed(axesOf(names, s.dims[d])))
      return failure();
  if (failed(axesOf(sharding.getPartial(), s.partial)))
    return failure();
  s.paddedTo.assign(sharding.getPaddedTo().asArrayRef().begin(),
                    sharding.getPaddedTo().asArrayRef().end());
  return s;
}

//===----------------------------------------------------------------------===//
// #kiln.sharding
//===----------------------------------------------------------------------===//

namespace {
/// `{"a", "b"}`: grid axis names.
ParseResult parseAxisNames(AsmParser &parser, ArrayAttr &out) {
  SmallVector<Attribute> names;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, [&]() -> ParseResult {
        std::string name;
        if (parser.parseString(&name))
          return failure();
        names.push_back(parser.getBuilder().getStringAttr(name));
        return success();
      }))
    return failure();
  out = parser.getBuilder().getArrayAttr(names);
  return success();
}

void printAxisNames(AsmPrinter &printer, ArrayAttr names) {
  printer << '{';
  llvm::interleaveComma(names.getAsRange<StringAttr>(), printer,
                        [&](StringAttr name) { printer.printString(name.getValue()); });
  printer << '}';
}
} // namespace

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  Builder &b = parser.getBuilder();
  SmallVector<Attribute> dims;
  ArrayAttr partial = b.getArrayAttr({});
  SmallVector<int64_t> padded;
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
        ArrayAttr names;
        if (parseAxisNames(parser, names))
          return failure();
        dims.push_back(names);
        return success();
      }))
    return {};
  llvm::StringSet<> keys;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    llvm::SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return {};
    if (!keys.insert(key).second) {
      parser.emitError(at) << "#kiln.sharding: '" << key << "' is given twice";
      return {};
    }
    if (key == "partial") {
      if (parseAxisNames(parser, partial))
        return {};
    } else if (key == "padded_to") {
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
            return parser.parseInteger(padded.emplace_back());
          }))
        return {};
    } else {
      parser.emitError(at) << "#kiln.sharding: expected 'partial' or 'padded_to', got '" << key
                           << "'";
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(parser.getContext(), b.getArrayAttr(dims), partial,
                                         b.getDenseI64ArrayAttr(padded));
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getDims().getAsRange<ArrayAttr>(), printer,
                        [&](ArrayAttr names) { printAxisNames(printer, names); });
  printer << ']';
  if (!getPartial().empty()) {
    printer << ", partial = ";
    printAxisNames(printer, getPartial());
  }
  if (!getPaddedTo().empty()) {
    printer << ", padded_to = [";
    llvm::interleaveComma(getPaddedTo().asArrayRef(), printer);
    printer << ']';
  }
  printer << '>';
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError, ArrayAttr dims,
                                   ArrayAttr partial, DenseI64ArrayAttr paddedTo) {
  llvm::StringSet<> seen;
  auto check = [&](Attribute list) -> LogicalResult {
    auto names = dyn_cast<ArrayAttr>(list);
    if (!names)
      return emitError() << "#kiln.sharding: grid axes must be a list of names, got " << list;
    for (Attribute name : names) {
      auto text = dyn_cast<StringAttr>(name);
      if (!text)
        return emitError() << "#kiln.sharding: a grid axis must be a name, got " << name;
      if (!seen.insert(text.getValue()).second)
        return emitError() << "#kiln.sharding: grid axis '" << text.getValue() << "' is used twice";
    }
    return success();
  };
  for (Attribute names : dims)
    if (failed(check(names)))
      return failure();
  if (failed(check(partial)))
    return failure();
  if (!paddedTo.empty() && paddedTo.size() != int64_t(dims.size()))
    return emitError() << "#kiln.sharding: padded_to lists " << paddedTo.size() << " sizes for "
                       << dims.size() << " dimensions";
  if (llvm::any_of(paddedTo.asArrayRef(), [](int64_t p) { return p < 0; }))
    return emitError() << "#kiln.sharding: padded_to sizes must be >= 0 (0: unpadded)";
  return success();
}

bool anySplit(const LoopSharding &loops) {
  return llvm::any_of(loops, [](const GridAxes &axes) { return !axes.empty(); });
}

Sharding requiredOperandSharding(const ShardingRule &rule, const LoopSharding &loops,
                                 unsigned operand) {
  Sharding s;
  for (int64_t l : rule.operands[operand])
    s.dims.push_back(l >= 0 ? loops[l] : GridAxes());
  return s;
}

Sharding producedResultSharding(const ShardingRule &rule, const LoopSharding &loops,
                                unsigned result) {
  Sharding s;
  const SmallVector<int64_t> &map = rule.results[result];
  for (int64_t l : map)
    s.dims.push_back(l >= 0 ? loops[l] : GridAxes());
  if (result < rule.reductions.size())
    for (int64_t l : rule.reductions[result])
      s.partial.append(loops[l].begin(), loops[l].end());
  llvm::sort(s.partial);
  return s;
}

std::optional<Sharding> pendingSumThrough(const ShardingRule &rule,
                                          ArrayRef<Sharding> operands) {
  if (!rule.sumsPartials || operands.empty() || operands.front().partial.empty() ||
      !llvm::all_of(operands, [&](const Sharding &s) { return s == operands.front(); }))
    return std::nullopt;
  return operands.front();
}

std::optional<Sharding> pendingSumFromOperand(const ShardingRule &rule, const LoopSharding &loops,
                                              ArrayRef<Sharding> operands, unsigned result) {
  if (result >= rule.pendingSumFrom.size() || rule.pendingSumFrom[result] < 0)
    return std::nullopt;
  unsigned operand = unsigned(rule.pendingSumFrom[result]);
  Sharding given = operands[operand];
  GridAxes pending = std::move(given.partial);
  given.partial.clear();
  Sharding produced = producedResultSharding(rule, loops, result);
  if (pending.empty() || given != requiredOperandSharding(rule, loops, operand) ||
      !produced.partial.empty())
    return std::nullopt;
  produced.partial = pending;
  return produced;
}

ArrayAttr loopShardingToAttr(MLIRContext *context, const LoopSharding &loops,
                             ArrayRef<std::string> axisNames) {
  Builder b(context);
  SmallVector<Attribute> perLoop;
  for (const GridAxes &axes : loops) {
    SmallVector<Attribute> names;
    for (int16_t a : axes)
      names.push_back(b.getStringAttr(axisNames[a]));
    perLoop.push_back(b.getArrayAttr(names));
  }
  return b.getArrayAttr(perLoop);
}

FailureOr<LoopSharding> loopShardingFromAttr(Attribute attr, ArrayRef<std::string> axisNames) {
  auto list = dyn_cast_or_null<ArrayAttr>(attr);
  if (!list)
    return failure();
  LoopSharding loops;
  for (Attribute perLoop : list) {
    auto names = dyn_cast<ArrayAttr>(perLoop);
    if (!names)
      return failure();
    GridAxes axes;
    for (Attribute n : names) {
      auto name = dyn_cast<StringAttr>(n);
      auto it = name ? llvm::find(axisNames, name.str()) : axisNames.end();
      if (it == axisNames.end())
        return failure();
      axes.push_back(int16_t(it - axisNames.begin()));
    }
    loops.push_back(axes);
  }
  return loops;
}

SmallVector<std::string> gridAxisNames(Operation *op) {
  auto module = isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  SmallVector<std::string> names;
  if (auto axes = module ? module->getAttrOfType<ArrayAttr>(kGridAxesAttr) : nullptr)
    for (Attribute a : axes)
      if (auto s = dyn_cast<StringAttr>(a))
        names.push_back(s.str());
  return names;
}

} // namespace kiln

LogicalResult kiln::verifyGridAxes(Operation *op, std::optional<ArrayRef<int16_t>> axes,
                                   StringRef attrName, DiagnosticFn error) {
  if (!axes)
    return success();
  size_t gridRank = gridAxisNames(op).size();
  for (auto [i, axis] : llvm::enumerate(*axes)) {
    if (axis < 0 || (gridRank && size_t(axis) >= gridRank))
      return error() << attrName << " entry " << axis << " is not an axis of the grid"
                     << (gridRank ? " (" + std::to_string(gridRank) + " axes)" : "");
    if (llvm::is_contained(axes->take_front(i), axis))
      return error() << attrName << " names axis " << axis << " twice";
  }
  return success();
}

LogicalResult kiln::verifyExpertBlock(Operation *op, std::optional<ArrayRef<int16_t>> axes,
                                      std::optional<int64_t> numExperts, int64_t localExperts,
                                      DiagnosticFn error) {
  if (failed(verifyGridAxes(op, axes, "expert_axes", error)))
    return failure();
  if (axes.has_value() != numExperts.has_value())
    return error() << "expert_axes and num_experts go together";
  int64_t total = numExperts.value_or(localExperts);
  if (total < localExperts || total % localExperts)
    return error() << "num_experts " << total << " is not a multiple of the " << localExperts
                   << " experts of the stacks";
  return success();
}
