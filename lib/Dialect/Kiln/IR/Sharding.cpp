//===- Sharding.cpp - How a value is split over the device grid -----------===//

#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

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

DictionaryAttr Sharding::toAttr(MLIRContext *context, ArrayRef<std::string> axisNames) const {
  Builder b(context);
  auto names = [&](const GridAxes &axes) {
    SmallVector<Attribute> out;
    for (int16_t a : axes)
      out.push_back(b.getStringAttr(axisNames[a]));
    return b.getArrayAttr(out);
  };
  SmallVector<NamedAttribute> fields;
  if (llvm::any_of(dims, [](const GridAxes &axes) { return !axes.empty(); })) {
    SmallVector<Attribute> perDim;
    for (const GridAxes &axes : dims)
      perDim.push_back(names(axes));
    fields.push_back(b.getNamedAttr("dims", b.getArrayAttr(perDim)));
  }
  if (!partial.empty())
    fields.push_back(b.getNamedAttr("partial", names(partial)));
  if (llvm::any_of(paddedTo, [](int64_t p) { return p != 0; }))
    fields.push_back(b.getNamedAttr("padded_to", b.getDenseI64ArrayAttr(paddedTo)));
  return b.getDictionaryAttr(fields);
}

FailureOr<Sharding> Sharding::fromAttr(Attribute attr, int64_t rank,
                                       ArrayRef<std::string> axisNames, std::string &error) {
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict) {
    error = "a sharding must be a dictionary {dims = [...], partial = [...]}";
    return failure();
  }
  Sharding s = replicated(rank);
  llvm::SmallDenseSet<int16_t> seen;
  auto parseAxes = [&](Attribute list, GridAxes &out) -> LogicalResult {
    auto array = dyn_cast<ArrayAttr>(list);
    if (!array) {
      error = "grid axes must be a list of axis names";
      return failure();
    }
    for (Attribute a : array) {
      auto name = dyn_cast<StringAttr>(a);
      auto it = name ? llvm::find(axisNames, name.str()) : axisNames.end();
      if (it == axisNames.end()) {
        error = "unknown grid axis " + (name ? "'" + name.str() + "'" : std::string("(not a string)"));
        return failure();
      }
      int16_t axis = int16_t(it - axisNames.begin());
      if (!seen.insert(axis).second) {
        error = "grid axis '" + name.str() + "' is used twice";
        return failure();
      }
      out.push_back(axis);
    }
    return success();
  };
  for (NamedAttribute field : dict) {
    if (field.getName() == "dims") {
      auto perDim = dyn_cast<ArrayAttr>(field.getValue());
      if (!perDim || int64_t(perDim.size()) != rank) {
        error = "'dims' must list the axes of each of the " + std::to_string(rank) +
                " dimensions";
        return failure();
      }
      for (auto [d, axes] : llvm::enumerate(perDim))
        if (failed(parseAxes(axes, s.dims[d])))
          return failure();
    } else if (field.getName() == "partial") {
      if (failed(parseAxes(field.getValue(), s.partial)))
        return failure();
    } else if (field.getName() == "padded_to") {
      auto sizes = dyn_cast<DenseI64ArrayAttr>(field.getValue());
      if (!sizes || int64_t(sizes.size()) != rank ||
          llvm::any_of(sizes.asArrayRef(), [](int64_t p) { return p < 0; })) {
        error = "'padded_to' must be an array<i64> of " + std::to_string(rank) +
                " sizes (0: unpadded)";
        return failure();
      }
      s.paddedTo.assign(sizes.asArrayRef().begin(), sizes.asArrayRef().end());
    } else {
      error = "unknown sharding field '" + field.getName().str() + "'";
      return failure();
    }
  }
  return s;
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
