//===- MemoryPlan.cpp - Static live-memory plan of a kiln function --------===//

#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Analysis/BufferLiveness.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Planner/ModulePath.h"
#include "kiln/Planner/Precision.h"
#include "kiln/Support/Diagnostics.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

using namespace mlir;

namespace kiln {

const char *memoryCategoryName(MemoryCategory category) {
  static constexpr const char *names[kNumMemoryCategories] = {
      "parameters",  "gradients",          "optimizer_state", "activations",
      "temporaries", "collective_buffers", "inputs"};
  return names[size_t(category)];
}

namespace {

/// Sizes and categories of a function's buffers.
struct BufferTable {
  std::vector<int64_t> bytes;
  std::vector<MemoryCategory> category;
};

BufferTable classify(func::FuncOp fn, const BufferLiveness &liveness,
                     const ValuePrecision *precision,
                     const llvm::DenseSet<Value> &gradients) {
  BufferTable table;
  llvm::DenseSet<Value> saved;
  for (Operation &op : liveness.body().without_terminator())
    if (auto indices = op.getAttrOfType<DenseI64ArrayAttr>(kSavedAttr))
      for (int64_t index : indices.asArrayRef())
        saved.insert(op.getResult(index));
  for (unsigned id = 0, e = liveness.numBuffers(); id < e; ++id) {
    const BufferLiveness::Buffer &buffer = liveness.buffer(id);
    Value creator = buffer.creator;
    table.bytes.push_back(precision ? precision->bytes(creator) : buffer.bytes);
    MemoryCategory category = MemoryCategory::Temporaries;
    if (auto arg = dyn_cast<BlockArgument>(creator)) {
      category = fn.getArgAttr(arg.getArgNumber(), kParamAttr)   ? MemoryCategory::Parameters
                 : fn.getArgAttr(arg.getArgNumber(), kStateAttr) ? MemoryCategory::OptimizerState
                                                                 : MemoryCategory::Inputs;
    } else if (gradients.contains(creator)) {
      category = MemoryCategory::Gradients;
    } else if (saved.contains(creator)) {
      category = MemoryCategory::Activations;
    } else if (isa<shard::ShardDialect>(creator.getDefiningOp()->getDialect())) {
      category = MemoryCategory::CollectiveBuffers;
    }
    table.category.push_back(category);
  }
  return table;
}

} // namespace

std::string describeBuffer(func::FuncOp fn, Value value) {
  std::string shape;
  if (auto type = dyn_cast<RankedTensorType>(value.getType()))
    for (int64_t d : type.getShape())
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
  std::string what;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    for (StringRef role : {kParamAttr.data(), kStateAttr.data(), kInputAttr.data()})
      if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), role))
        what = name.getValue().str();
  } else {
    Operation *op = value.getDefiningOp();
    what = op->getName().getStringRef().str();
    if (auto fqn = op->getAttrOfType<StringAttr>("fqn"))
      what += " " + fqn.getValue().str();
    else if (StringRef owner = owningModule(op->getOperand(0)); !owner.empty())
      what += " of " + owner.str();
  }
  return what + " [" + shape + "]";
}

MemoryPlan planMemory(func::FuncOp fn, const ValuePrecision *precision, size_t contributors) {
  MemoryPlanOptions options;
  options.contributors = contributors;
  return planMemory(fn, precision, options);
}

MemoryPlan planMemory(func::FuncOp fn, const ValuePrecision *precision,
                      const MemoryPlanOptions &options) {
  size_t contributors = options.contributors;
  FailureOr<BufferLiveness> liveness = failure();
  succeedOrFail(*fn->getContext(), "no memory plan for @" + fn.getName().str(), [&] {
    liveness = BufferLiveness::compute(fn);
    return LogicalResult(liveness);
  });
  llvm::DenseSet<Value> gradients = stepGradients(fn);
  BufferTable table = classify(fn, *liveness, precision, gradientValues(fn));

  MemoryPlan plan;
  int64_t live = 0, liveIntermediate = 0;
  std::array<int64_t, kNumMemoryCategories> liveByCategory{};
  // The peak is first reached after buffer `peakCount` buffers were acquired.
  int64_t acquired = 0, peakCount = 0;
  Operation *current = nullptr;
  auto acquire = [&](unsigned id) {
    live += table.bytes[id];
    liveByCategory[size_t(table.category[id])] += table.bytes[id];
    if (!liveness->buffer(id).isArgument)
      liveIntermediate += table.bytes[id];
    ++acquired;
    if (options.timeline)
      options.timeline->push_back({liveness->buffer(id).creator, live, liveByCategory});
    if (options.reportAfter ? acquired == *options.reportAfter : live > plan.peakBytes) {
      plan.peakBytes = live;
      plan.peakByCategory = liveByCategory;
      plan.peakOp = current;
      peakCount = acquired;
    }
    plan.peakIntermediateBytes = std::max(plan.peakIntermediateBytes, liveIntermediate);
  };
  auto release = [&](unsigned id) {
    live -= table.bytes[id];
    liveByCategory[size_t(table.category[id])] -= table.bytes[id];
    if (!liveness->buffer(id).isArgument)
      liveIntermediate -= table.bytes[id];
  };

  for (unsigned id : liveness->argumentBuffers()) {
    acquire(id);
    auto arg = cast<BlockArgument>(liveness->buffer(id).creator);
    plan.argumentBytes += table.bytes[id];
    if (fn.getArgAttr(arg.getArgNumber(), kParamAttr))
      plan.parameterBytes += table.bytes[id];
    if (fn.getArgAttr(arg.getArgNumber(), kStateAttr))
      plan.stateBytes += table.bytes[id];
  }
  llvm::DenseSet<unsigned> saved;
  for (Operation &op : liveness->body().without_terminator()) {
    current = &op;
    const BufferLiveness::Step &step = liveness->step(&op);
    for (unsigned id : step.created)
      acquire(id);
    if (auto indices = op.getAttrOfType<DenseI64ArrayAttr>(kSavedAttr))
      for (int64_t index : indices.asArrayRef())
        if (std::optional<unsigned> id = liveness->bufferOf(op.getResult(index)))
          if (!liveness->buffer(*id).isArgument && saved.insert(*id).second)
            plan.savedActivationBytes += table.bytes[*id];
    for (unsigned id : step.released)
      release(id);
  }
  // Microbatches run one after another: the activation memory is one's.
  int64_t microbatches = 1;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (auto m = fn.getArgAttrOfType<IntegerAttr>(i, kMicrobatchAttr))
      microbatches = std::max(microbatches, m.getInt() + 1);
  plan.savedActivationBytes /= microbatches;
  for (Value gradient : gradients)
    plan.gradientBytes += precision ? precision->bytes(gradient) : tensorBytes(gradient.getType());

  // Replay up to the peak to name its largest buffers.
  if (contributors > 0) {
    llvm::DenseSet<unsigned> liveSet;
    int64_t count = 0;
    auto replay = [&](unsigned id) {
      if (count < peakCount) {
        liveSet.insert(id);
        ++count;
      }
    };
    for (unsigned id : liveness->argumentBuffers())
      replay(id);
    for (Operation &op : liveness->body().without_terminator()) {
      if (count >= peakCount)
        break;
      const BufferLiveness::Step &step = liveness->step(&op);
      for (unsigned id : step.created)
        replay(id);
      if (count >= peakCount)
        break;
      for (unsigned id : step.released)
        liveSet.erase(id);
    }
    std::vector<unsigned> ids(liveSet.begin(), liveSet.end());
    std::sort(ids.begin(), ids.end(), [&](unsigned a, unsigned b) {
      return table.bytes[a] != table.bytes[b] ? table.bytes[a] > table.bytes[b] : a < b;
    });
    for (size_t i = 0; i < ids.size() && i < contributors; ++i)
      plan.topContributors.push_back({describeBuffer(fn, liveness->buffer(ids[i]).creator),
                                      table.category[ids[i]], table.bytes[ids[i]]});
    std::map<std::string, int64_t> byModule;
    for (unsigned id : ids) {
      std::string key = moduleKeyOf(liveness->buffer(id).creator);
      byModule[key.empty() ? "(inputs)" : key] += table.bytes[id];
    }
    plan.peakByModule.assign(byModule.begin(), byModule.end());
    std::stable_sort(plan.peakByModule.begin(), plan.peakByModule.end(),
                     [](const auto &a, const auto &b) { return a.second > b.second; });
  }
  return plan;
}

} // namespace kiln
