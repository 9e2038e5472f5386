//===- PipelineSplit.cpp - kiln-pipeline-split: the loss in stages --------===//
//
// Pipeline parallelism's cut of the captured loss into one function per
// stage, each with the values that cross stage boundaries as explicit
// arguments and results (kiln.transfer), so that each stage can be
// differentiated on its own from its output's cotangent and the transfers
// become point-to-point sends on the pipeline axis.
//
//===----------------------------------------------------------------------===//

#include "kiln/Config/PipelineStages.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "ParameterOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace kiln {
#define GEN_PASS_DEF_PIPELINESPLIT
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

std::string_view moduleOf(Operation *op) {
  auto fqn = op->getAttrOfType<StringAttr>("fqn");
  return fqn ? topModule(fqn.getValue()) : std::string_view();
}

/// Where each op of the function runs: a stage, or everywhere it is used.
struct StagePlan {
  /// Ops of parameters alone, cloned into each stage that uses them.
  llvm::DenseSet<Operation *> replicated;
  llvm::DenseMap<Operation *, int64_t> stageOf;
  /// The values later stages use, in the function's order, with the last
  /// stage that uses each.
  llvm::MapVector<Value, int64_t> transfers;
  int64_t numStages = 1;

  /// The stage that computes `v`; -1 for an argument or a replicated op's
  /// result, which every stage has of its own.
  int64_t producer(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && !replicated.contains(def) ? stageOf.lookup(def) : -1;
  }
};

struct PipelineSplitPass : public kiln::impl::PipelineSplitBase<PipelineSplitPass> {
  using PipelineSplitBase::PipelineSplitBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(funcName);
    if (!fn) {
      module.emitError() << "kiln-pipeline-split: no function @" << funcName;
      return signalPassFailure();
    }
    FailureOr<StagePlan> plan = planStages(fn);
    if (failed(plan))
      return signalPassFailure();
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointAfter(fn);
    for (int64_t s = 0; s < plan->numStages; ++s)
      b.setInsertionPointAfter(buildStage(b, fn, *plan, s));
  }

  /// Places every op: a module's ops in the stage where the module first
  /// appears, the stage advancing at each start.
  FailureOr<StagePlan> planStages(func::FuncOp fn) {
    StagePlan plan;
    plan.numStages = int64_t(stageStarts.size()) + 1;
    SmallVector<Operation *> ops;
    for (Operation &op : fn.getBody().front().without_terminator())
      ops.push_back(&op);
    plan.replicated = opsOfParametersAlone(fn, ops);
    llvm::StringMap<int64_t> stageOfModule;
    int64_t stage = 0;
    // A value crosses to every stage up to its last user.
    auto use = [&](Value v, int64_t user) {
      if (int64_t from = plan.producer(v); from >= 0 && from < user) {
        int64_t &last = plan.transfers[v];
        last = std::max(last, user);
      }
    };
    for (Operation *op : ops) {
      if (plan.replicated.contains(op))
        continue;
      std::string_view module = moduleOf(op);
      auto [it, added] = stageOfModule.try_emplace(module, stage);
      if (added && stage + 1 < plan.numStages && module == stageStarts[stage])
        it->second = ++stage;
      plan.stageOf[op] = it->second;
      for (Value v : op->getOperands()) {
        if (int64_t from = plan.producer(v); from > it->second)
          return op->emitOpError()
                 << "(module '" << module << "', stage " << it->second << ") uses a value of stage "
                 << from << " (module '" << moduleOf(v.getDefiningOp())
                 << "'): a stage may only use earlier stages' values";
        use(v, it->second);
      }
    }
    if (stage + 1 != plan.numStages)
      return fn.emitOpError() << "kiln-pipeline-split: stage-starts names '" << stageStarts[stage]
                              << "', which is not a module of @" << funcName << " after '"
                              << (stage ? stageStarts[stage - 1] : "") << "' in its order";
    // @func's results are the last stage's.
    for (Value v : fn.getBody().front().getTerminator()->getOperands())
      use(v, plan.numStages - 1);
    // Transfers numbered in the function's order, whatever order uses came in.
    llvm::MapVector<Value, int64_t> ordered;
    for (Operation *op : ops)
      for (Value v : op->getResults())
        if (plan.transfers.count(v))
          ordered.insert({v, plan.transfers.lookup(v)});
    plan.transfers = std::move(ordered);
    return plan;
  }

  /// The values crossing from stage `s` to `s + 1`, with their numbers.
  SmallVector<std::pair<Value, int64_t>> crossing(const StagePlan &plan, int64_t s) {
    SmallVector<std::pair<Value, int64_t>> values;
    for (auto [index, entry] : llvm::enumerate(plan.transfers))
      if (plan.producer(entry.first) <= s && s < entry.second)
        values.push_back({entry.first, int64_t(index)});
    return values;
  }

  /// Stage `s`: the transfers in, the arguments of `fn` it uses, its ops
  /// (replicated ones cloned where first needed), the transfers out.
  func::FuncOp buildStage(OpBuilder &b, func::FuncOp fn, const StagePlan &plan, int64_t s) {
    Block &body = fn.getBody().front();
    bool last = s + 1 == plan.numStages;
    SmallVector<std::pair<Value, int64_t>> in = s ? crossing(plan, s - 1) : decltype(in){};
    SmallVector<std::pair<Value, int64_t>> out = last ? decltype(out){} : crossing(plan, s);

    // The arguments of fn the stage's ops (and their replicated operands) use.
    llvm::SetVector<Operation *> ops;
    llvm::DenseSet<Value> usedArgs;
    std::function<void(Value)> need = [&](Value v) {
      if (isa<BlockArgument>(v))
        return void(usedArgs.insert(v));
      Operation *def = v.getDefiningOp();
      if (plan.replicated.contains(def) && !ops.contains(def)) {
        for (Value operand : def->getOperands())
          need(operand);
        ops.insert(def);
      }
    };
    for (Operation &op : body.without_terminator())
      if (!plan.replicated.contains(&op) && plan.stageOf.lookup(&op) == s) {
        for (Value v : op.getOperands())
          need(v);
        ops.insert(&op);
      }
    for (auto [v, index] : out)
      need(v);
    if (last)
      for (Value v : body.getTerminator()->getOperands())
        need(v);

    SmallVector<Type> argTypes, resultTypes;
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    auto transferAttr = [&](int64_t index) {
      return b.getDictionaryAttr(b.getNamedAttr(kTransferAttr, b.getI64IntegerAttr(index)));
    };
    for (auto [v, index] : in) {
      argTypes.push_back(v.getType());
      argAttrs.push_back(transferAttr(index));
    }
    SmallVector<BlockArgument> fnArgs;
    for (BlockArgument arg : body.getArguments())
      if (usedArgs.contains(arg)) {
        fnArgs.push_back(arg);
        argTypes.push_back(arg.getType());
        argAttrs.push_back(fn.getArgAttrDict(arg.getArgNumber()));
      }
    if (last) {
      llvm::append_range(resultTypes, fn.getResultTypes());
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        resultAttrs.push_back(fn.getResultAttrDict(i));
    } else {
      for (auto [v, index] : out) {
        resultTypes.push_back(v.getType());
        resultAttrs.push_back(transferAttr(index));
      }
    }

    auto stage = func::FuncOp::create(b, fn.getLoc(), (funcName + "_stage" + Twine(s)).str(),
                                      b.getFunctionType(argTypes, resultTypes));
    stage->setAttr(kStageAttr, b.getI64IntegerAttr(s));
    stage.setAllArgAttrs(argAttrs);
    stage.setAllResultAttrs(resultAttrs);
    Block *entry = stage.addEntryBlock();
    IRMapping map;
    for (auto [i, entryValue] : llvm::enumerate(in))
      map.map(entryValue.first, entry->getArgument(i));
    for (auto [i, arg] : llvm::enumerate(fnArgs))
      map.map(arg, entry->getArgument(in.size() + i));
    OpBuilder inner = OpBuilder::atBlockEnd(entry);
    // Clone in the function's order, so replicated ops precede their users.
    for (Operation &op : body.without_terminator())
      if (ops.contains(&op))
        inner.clone(op, map);
    SmallVector<Value> results;
    if (last)
      for (Value v : body.getTerminator()->getOperands())
        results.push_back(map.lookup(v));
    else
      for (auto [v, index] : out)
        results.push_back(map.lookup(v));
    func::ReturnOp::create(inner, fn.getLoc(), results);
    return stage;
  }
};

} // namespace
