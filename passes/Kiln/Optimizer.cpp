//===- Optimizer.cpp - AdamW, clipping and LR schedule: @train_step -------===//

#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace kiln {
#define GEN_PASS_DEF_OPTIMIZER
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct OptimizerPass : public kiln::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (pipelineDegree > 1) {
      if (module.lookupSymbol(trainFuncName)) {
        module.emitError() << "kiln-optimizer: @" << trainFuncName << " already exists";
        return signalPassFailure();
      }
      if (failed(checkOptions(module)) || failed(buildPipelineUpdate(module)))
        return signalPassFailure();
      return;
    }
    auto grad = module.lookupSymbol<func::FuncOp>(gradFuncName);
    if (!grad) {
      module.emitError() << "kiln-optimizer: no function @" << gradFuncName
                         << " (run kiln-autodiff first)";
      return signalPassFailure();
    }
    if (module.lookupSymbol(trainFuncName)) {
      module.emitError() << "kiln-optimizer: @" << trainFuncName << " already exists";
      return signalPassFailure();
    }
    if (failed(checkOptions(module)) || failed(build(grad)))
      return signalPassFailure();
  }

  LogicalResult checkOptions(ModuleOp module) {
    auto fail = [&](StringRef what) {
      return module.emitError() << "kiln-optimizer: " << what;
    };
    if (!(lr > 0) || !(eps > 0) || !(maxNorm > 0) || weightDecay < 0)
      return fail("lr, eps and max-norm must be positive and weight-decay non-negative");
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
      return fail("beta1 and beta2 must be in [0, 1)");
    if (!(loadBalanceCoeff >= 0) || !std::isfinite(double(loadBalanceCoeff)))
      return fail("load-balance-coeff must be a finite number >= 0");
    if (microbatches < 1)
      return fail("microbatches must be at least 1, got " + std::to_string(microbatches));
    if (pipelineDegree < 1 || pipelineRank < 0 || pipelineRank >= pipelineDegree)
      return fail("pipeline-rank must be in [0, pipeline-degree), got pipeline-rank=" +
                  std::to_string(pipelineRank) +
                  " pipeline-degree=" + std::to_string(pipelineDegree));
    if (pipelineDegree > 1 && loadBalanceCoeff > 0)
      return fail("load-balance-coeff > 0 (a MoE router's expert bias) is not supported with "
                  "pipeline-degree > 1 yet: the bias would follow every stage's routing");
    return success();
  }

  /// Where @grad-func's gradients (in parameter order) and loss are.
  struct GradOutputs {
    SmallVector<unsigned> grads;
    unsigned loss = 0;
  };

  /// @train-func's arguments: their types and attributes, and where each
  /// kind sits. Order: params..., step, exp_avg..., exp_avg_sq..., the data
  /// inputs once per microbatch, the expert biases; a convention for
  /// readers, consumers go by the attributes.
  struct StepArguments {
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    SmallVector<size_t> params, expAvg, expAvgSq;
    size_t step = 0;
    SmallVector<SmallVector<size_t>> inputs; ///< per microbatch
    SmallVector<RouterOp> routers;           ///< aux-loss-free balancing's
    SmallVector<size_t> biases;              ///< each router's expert bias

    size_t add(Type type, DictionaryAttr attributes) {
      types.push_back(type);
      attrs.push_back(attributes);
      return types.size() - 1;
    }
  };

  /// What the microbatches sum: the loss, each parameter's gradient, the
  /// metrics; and each router's chosen experts, per microbatch.
  struct StepSums {
    Value loss;
    SmallVector<Value> grads, metrics;
    SmallVector<SmallVector<Value>> routedExperts;
  };

  static DictionaryAttr tag(Builder &b, StringRef name, StringRef value) {
    return b.getDictionaryAttr(b.getNamedAttr(name, b.getStringAttr(value)));
  }

  LogicalResult build(func::FuncOp grad) {
    FailureOr<Signature> sig = Signature::get(grad);
    if (failed(sig))
      return failure();
    FailureOr<GradOutputs> outputs = gradOutputs(grad, *sig);
    if (failed(outputs))
      return failure();
    OpBuilder b(grad);
    FailureOr<StepArguments> args = stepArguments(b, grad, *sig);
    if (failed(args))
      return failure();
    b.setInsertionPointAfter(grad);
    auto train =
        func::FuncOp::create(b, grad.getLoc(), trainFuncName, b.getFunctionType(args->types, {}));
    train.setAllArgAttrs(args->attrs);
    b.setInsertionPointToStart(train.addEntryBlock());
    SmallVector<Signature::Slot> metrics = metricOutputs(grad);
    StepSums sums = inlineMicrobatches(b, grad, train, *sig, *outputs, metrics, *args);
    emitUpdate(b, grad.getLoc(), train, metrics, *args, sums);
    return success();
  }

  /// Each parameter's gradient result and the loss, found by their tags.
  FailureOr<GradOutputs> gradOutputs(func::FuncOp grad, const Signature &sig) {
    GradOutputs outputs;
    for (const Signature::Slot &p : sig.params()) {
      std::optional<unsigned> g = sig.result(kGradAttr, p.name);
      if (!g)
        return grad.emitError() << "kiln-optimizer: no gradient result of @" << gradFuncName
                                << " is tagged " << kGradAttr << " = \"" << p.name << "\"";
      outputs.grads.push_back(*g);
    }
    std::optional<unsigned> loss = sig.result(kOutputAttr, kLossOutput);
    if (!loss)
      return grad.emitError() << "kiln-optimizer: no result of @" << gradFuncName
                              << " is tagged " << kOutputAttr << " = \"" << kLossOutput << "\"";
    if (sig.inputs().empty())
      return grad.emitError() << "kiln-optimizer: @" << gradFuncName
                              << " has no argument tagged " << kInputAttr;
    outputs.loss = *loss;
    return outputs;
  }

  FailureOr<StepArguments> stepArguments(OpBuilder &b, func::FuncOp grad, const Signature &sig) {
    StepArguments args;
    auto typeOf = [&](const Signature::Slot &slot) { return grad.getArgumentTypes()[slot.index]; };
    for (const Signature::Slot &p : sig.params())
      args.params.push_back(args.add(typeOf(p), tag(b, kParamAttr, p.name)));
    args.step = args.add(RankedTensorType::get({}, b.getI64Type()), tag(b, kStateAttr, kStepState));
    for (const Signature::Slot &p : sig.params())
      args.expAvg.push_back(args.add(typeOf(p), tag(b, kStateAttr, expAvgName(p.name))));
    for (const Signature::Slot &p : sig.params())
      args.expAvgSq.push_back(args.add(typeOf(p), tag(b, kStateAttr, expAvgSqName(p.name))));
    // One copy of the data inputs per microbatch, microbatch-major.
    args.inputs.resize(microbatches);
    for (int64_t m = 0; m < microbatches; ++m)
      for (const Signature::Slot &input : sig.inputs()) {
        NamedAttrList attrs(grad.getArgAttrDict(input.index));
        if (microbatches > 1)
          attrs.set(kMicrobatchAttr, b.getI64IntegerAttr(m));
        args.inputs[m].push_back(args.add(typeOf(input), attrs.getDictionary(b.getContext())));
      }
    // Aux-loss-free balancing: an expert bias per router of the forward.
    if (loadBalanceCoeff > 0)
      for (auto router : grad.getBody().getOps<RouterOp>()) {
        if (router.getExpertBias())
          return router.emitOpError() << "(fqn '" << router.getFqn()
                                      << "'): already has an expert bias";
        int64_t experts = router.getProbs().getType().getShape().back();
        args.routers.push_back(router);
        args.biases.push_back(args.add(RankedTensorType::get({experts}, b.getF32Type()),
                                       tag(b, kStateAttr, expertBiasName(router.getFqn()))));
      }
    return args;
  }

  /// The loss and gradients inlined once per microbatch into `train`; each
  /// microbatch's loss, metrics and gradients are added to the running sums
  /// right away, so its activations and gradients die before the next one
  /// starts. Every microbatch routes with the step's expert bias.
  StepSums inlineMicrobatches(OpBuilder &b, func::FuncOp grad, func::FuncOp train,
                              const Signature &sig, const GradOutputs &outputs,
                              ArrayRef<Signature::Slot> metrics, StepArguments &args) {
    auto arg = [&](size_t index) { return train.getArgument(index); };
    auto gradReturn = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    StepSums sums;
    sums.routedExperts.resize(args.routers.size());
    sums.grads.resize(outputs.grads.size());
    sums.metrics.resize(metrics.size());
    IRMapping mapping;
    for (int64_t m = 0; m < microbatches; ++m) {
      mapping.clear();
      for (auto [p, index] : llvm::zip(sig.params(), args.params))
        mapping.map(grad.getArgument(p.index), arg(index));
      for (auto [input, index] : llvm::zip(sig.inputs(), args.inputs[m]))
        mapping.map(grad.getArgument(input.index), arg(index));
      for (Operation &op : grad.getBody().front().without_terminator())
        b.clone(op, mapping);
      for (auto [router, index, experts] :
           llvm::zip(args.routers, args.biases, sums.routedExperts)) {
        auto routed = cast<RouterOp>(mapping.lookup(router.getWeights()).getDefiningOp());
        routed.getExpertBiasMutable().assign(arg(index));
        experts.push_back(routed.getExperts());
      }
      auto accumulate = [&](Value &sum, unsigned result, StringRef fqn, bool gradient) {
        Value value = mapping.lookup(gradReturn.getOperand(result));
        if (m == 0) {
          sum = value;
          return;
        }
        auto add = AddOp::create(b, grad.getLoc(), sum, value,
                                 b.getStringAttr("optimizer.accumulate." + fqn));
        if (gradient)
          add->setAttr(kAccumulateAttr, b.getUnitAttr());
        sum = add;
      };
      accumulate(sums.loss, outputs.loss, kLossOutput, false);
      for (auto [i, r] : llvm::enumerate(outputs.grads))
        accumulate(sums.grads[i], r, sig.params()[i].name, true);
      for (auto [value, metric] : llvm::zip(sums.metrics, metrics))
        accumulate(value, metric.index, metric.name, false);
    }
    return sums;
  }

  /// A sum of N microbatches' means as the mean over the step (scalars only).
  Value mean(OpBuilder &b, Location loc, Value sum, StringRef fqn) {
    if (microbatches == 1)
      return sum;
    return ScaleOp::create(b, loc, sum, b.getF64FloatAttr(1.0 / double(microbatches)),
                           b.getStringAttr("optimizer.mean." + fqn));
  }

  /// @train-func's results and their attributes.
  struct StepResults {
    SmallVector<Value> values;
    SmallVector<DictionaryAttr> attrs;
    void add(Value value, DictionaryAttr attributes) {
      values.push_back(value);
      attrs.push_back(attributes);
    }
  };

  /// Every parameter through kiln.adamw (named after `modules`) at the
  /// scheduled rate of the step with the clipping coefficient `coef`; the
  /// updated parameters, the next step and the moments are added to
  /// `results`.
  void emitAdamW(OpBuilder &b, Location loc, func::FuncOp train, const StepArguments &args,
                 ArrayRef<Value> grads, ArrayRef<std::string> modules, Value coef,
                 StepResults &results) {
    auto arg = [&](size_t index) { return train.getArgument(index); };
    Value step = arg(args.step);
    Value rate =
        LrScheduleOp::create(b, loc, step, b.getF64FloatAttr(lr), b.getI64IntegerAttr(warmupSteps),
                             b.getI64IntegerAttr(stableSteps), b.getI64IntegerAttr(decaySteps),
                             DecayTypeAttr::get(b.getContext(), decayType),
                             b.getF64FloatAttr(minLrFactor), b.getStringAttr("lr_scheduler"));
    SmallVector<Value> newExpAvg, newExpAvgSq;
    for (auto [i, index] : llvm::enumerate(args.params)) {
      auto update = AdamWOp::create(
          b, loc, arg(index), grads[i], arg(args.expAvg[i]), arg(args.expAvgSq[i]), step, rate,
          coef, b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
          b.getF64FloatAttr(weightDecay), b.getStringAttr(modules[i]));
      results.add(update.getParamOut(), args.attrs[index]);
      newExpAvg.push_back(update.getExpAvgOut());
      newExpAvgSq.push_back(update.getExpAvgSqOut());
    }
    results.add(NextStepOp::create(b, loc, step, b.getStringAttr("optimizer.step")),
                args.attrs[args.step]);
    for (auto [values, indices] :
         {std::pair{&newExpAvg, &args.expAvg}, {&newExpAvgSq, &args.expAvgSq}})
      for (auto [value, index] : llvm::zip(*values, *indices))
        results.add(value, args.attrs[index]);
  }

  /// Returns `results` from `train`, whose type and result attributes follow.
  static void finish(OpBuilder &b, Location loc, func::FuncOp train, const StepArguments &args,
                     const StepResults &results) {
    func::ReturnOp::create(b, loc, results.values);
    train.setFunctionType(b.getFunctionType(args.types, ValueRange(results.values).getTypes()));
    train.setAllResultAttrs(results.attrs);
  }

  /// The step's update and its results: the loss and metrics as means, the
  /// expert biases moved by the step's load, the gradients clipped by their
  /// total norm, the rate scheduled and every parameter updated. With
  /// microbatches the gradients are sums: the norm and the coefficient the
  /// update multiplies them by carry the 1/N.
  void emitUpdate(OpBuilder &b, Location loc, func::FuncOp train, ArrayRef<Signature::Slot> metrics,
                  StepArguments &args, StepSums &sums) {
    auto arg = [&](size_t index) { return train.getArgument(index); };
    Value loss = mean(b, loc, sums.loss, kLossOutput);
    for (auto [value, metric] : llvm::zip(sums.metrics, metrics))
      value = mean(b, loc, value, metric.name);
    SmallVector<Value> newBiases;
    for (auto [router, index, experts] : llvm::zip(args.routers, args.biases, sums.routedExperts))
      newBiases.push_back(ExpertBiasUpdateOp::create(b, router.getLoc(), arg(index), experts,
                                                     b.getF64FloatAttr(loadBalanceCoeff),
                                                     router.getFqnAttr()));
    Value norm = mean(b, loc,
                      GlobalNormOp::create(b, loc, sums.grads,
                                           b.getStringAttr("optimizer.grad_norm"), UnitAttr()),
                      kGradNormOutput);
    StepResults results;
    SmallVector<std::string> modules;
    for (size_t index : args.params)
      modules.push_back(moduleOf(arg(index)));
    emitAdamW(b, loc, train, args, sums.grads, modules, clipCoef(b, loc, norm), results);
    for (auto [bias, index] : llvm::zip(newBiases, args.biases))
      results.add(bias, args.attrs[index]);
    results.add(loss, tag(b, kOutputAttr, kLossOutput));
    results.add(norm, tag(b, kOutputAttr, kGradNormOutput));
    for (auto [value, metric] : llvm::zip(sums.metrics, metrics))
      results.add(value, tag(b, kOutputAttr, metric.name));
    finish(b, loc, train, args, results);
  }

  /// The clipping coefficient of the step's `norm`; with microbatches it
  /// multiplies gradient sums, so it carries the 1/N.
  Value clipCoef(OpBuilder &b, Location loc, Value norm) {
    return mean(b, loc,
                ClipCoefOp::create(b, loc, norm, b.getF64FloatAttr(maxNorm),
                                   b.getStringAttr("optimizer.clip_grad_norm")),
                "clip_grad_norm");
  }

  /// pipeline-degree > 1: one pipeline rank's update (Passes.td).
  LogicalResult buildPipelineUpdate(ModuleOp module) {
    // Each stage's backward, by stage; a parameter's first stage.
    std::map<int64_t, func::FuncOp> backwards;
    for (auto fn : module.getOps<func::FuncOp>())
      if (auto stage = fn->getAttrOfType<IntegerAttr>(kStageAttr);
          stage && fn.getName().ends_with("_backward"))
        backwards[stage.getInt()] = fn;
    if (backwards.empty())
      return module.emitError() << "kiln-optimizer: pipeline-degree=" << int64_t(pipelineDegree)
                                << ", but no function is a stage's backward ('" << kStageAttr
                                << "', named ..._backward: run kiln-autodiff pipeline-stages)";
    int64_t numStages = int64_t(backwards.size());
    if (backwards.rbegin()->first != numStages - 1)
      return module.emitError() << "kiln-optimizer: the stage backwards are not numbered 0 to "
                                << numStages - 1;
    if (pipelineRank >= numStages)
      return module.emitError() << "kiln-optimizer: pipeline-rank=" << int64_t(pipelineRank)
                                << " runs no stage: there are " << numStages << " for "
                                << int64_t(pipelineDegree) << " pipeline ranks";
    llvm::StringMap<int64_t> firstStage;
    for (auto &[stage, fn] : backwards)
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        if (auto key = fn.getResultAttrOfType<StringAttr>(i, kGradAttr))
          firstStage.try_emplace(key.getValue(), stage);

    // This rank's parameters in stage order, each once, with the module
    // that owns it in the stage's forward (the kiln.adamw's name).
    struct Param {
      std::string key;
      Type type;
      std::string module;
    };
    SmallVector<Param> params;
    llvm::StringSet<> seen;
    // Gradients stored split (FSDP, TP inside a stage): a rank's squares are
    // of its shards, summed over the axes they are split over as well as
    // over pp. Gradients split alike share one sum (one replicated over tp
    // counts once), as kiln-partition splits a norm; every rank all-reduces
    // a sum for every way any stage's gradients are split (0 where it has
    // none), so all ranks meet in the same collectives.
    SmallVector<std::string> axisNames = gridAxisNames(module);
    auto splitAxesOf = [&](func::FuncOp fn, unsigned i) {
      std::set<int16_t> axes;
      if (auto sharding = fn.getResultAttrOfType<ShardingAttr>(i, kShardingAttr))
        for (ArrayAttr dim : sharding.getDims().getAsRange<ArrayAttr>())
          for (StringAttr axis : dim.getAsRange<StringAttr>())
            if (auto it = llvm::find(axisNames, axis.getValue()); it != axisNames.end())
              axes.insert(int16_t(it - axisNames.begin()));
      return axes;
    };
    std::map<std::set<int16_t>, SmallVector<Value>> squaresBySplit;
    // How partitioned stages store each parameter, by key.
    llvm::StringMap<Attribute> shardingOf;
    std::map<std::string, std::set<int16_t>> splitOf;
    for (auto &[stage, fn] : backwards)
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        if (auto key = fn.getResultAttrOfType<StringAttr>(i, kGradAttr)) {
          squaresBySplit[splitAxesOf(fn, i)];
          splitOf.try_emplace(key.str(), splitAxesOf(fn, i));
        }
    for (auto &[stage, fn] : backwards) {
      if (stage % pipelineDegree != pipelineRank)
        continue;
      auto forward = module.lookupSymbol<func::FuncOp>(
          (fn.getName().drop_back(StringRef("_backward").size()) + "_forward").str());
      for (unsigned i = 0; i < fn.getNumResults(); ++i) {
        auto key = fn.getResultAttrOfType<StringAttr>(i, kGradAttr);
        if (!key || !seen.insert(key.getValue()).second)
          continue;
        std::string owner = "optimizer";
        for (unsigned a = 0; forward && a < forward.getNumArguments(); ++a)
          if (forward.getArgAttrOfType<StringAttr>(a, kParamAttr) == key) {
            owner = moduleOf(forward.getArgument(a));
            if (Attribute sharding = forward.getArgAttr(a, kShardingAttr))
              shardingOf[key.getValue()] = sharding;
          }
        params.push_back({key.str(), fn.getResultTypes()[i], owner});
      }
    }

    OpBuilder b(module.getBodyRegion());
    std::string grid = pipelineGrid(b, module);
    if (grid.empty())
      return failure();
    int64_t gridRank = (*module.getOps<shard::GridOp>().begin()).getShape().size();
    for (int64_t axis : dataParallelAxes)
      if (axis <= kPipelineAxis || axis >= gridRank)
        return module.emitError() << "kiln-optimizer: data-parallel-axes names axis " << axis
                                  << ", not an axis of the grid after 'pp' (1 to " << gridRank - 1
                                  << ")";
    StepArguments args;
    for (const Param &p : params)
      args.params.push_back(args.add(p.type, tag(b, kParamAttr, p.key)));
    args.step = args.add(RankedTensorType::get({}, b.getI64Type()), tag(b, kStateAttr, kStepState));
    for (const Param &p : params)
      args.expAvg.push_back(args.add(p.type, tag(b, kStateAttr, expAvgName(p.key))));
    for (const Param &p : params)
      args.expAvgSq.push_back(args.add(p.type, tag(b, kStateAttr, expAvgSqName(p.key))));
    SmallVector<size_t> gradArgs;
    for (const Param &p : params)
      gradArgs.push_back(args.add(p.type, tag(b, kGradAttr, p.key)));

    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto train = func::FuncOp::create(b, loc, trainFuncName, b.getFunctionType(args.types, {}));
    train.setAllArgAttrs(args.attrs);
    b.setInsertionPointToStart(train.addEntryBlock());
    SmallVector<Value> grads;
    SmallVector<int16_t> replicas;
    for (int64_t axis : dataParallelAxes)
      replicas.push_back(int16_t(axis));
    for (auto [p, index] : llvm::zip(params, gradArgs)) {
      grads.push_back(train.getArgument(index));
      // The replicas' gradients summed first: every replica then updates alike.
      if (!replicas.empty())
        grads.back() = shard::AllReduceOp::create(b, loc, grads.back(), grid, replicas,
                                                  shard::ReductionKind::Sum);
      // A parameter on several ranks counts on the first.
      if (firstStage.lookup(p.key) % pipelineDegree == pipelineRank)
        squaresBySplit[splitOf.at(p.key)].push_back(grads.back());
    }
    // A rank with no gradient split one way (its parameters all start on
    // other ranks) adds 0, but still joins that way's all-reduce.
    StringAttr fqn = b.getStringAttr("optimizer.grad_norm");
    Value squares;
    for (auto &[split, group] : squaresBySplit) {
      Value part =
          group.empty()
              ? ConstantOp::create(b, loc,
                                   SplatElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                                          b.getF32FloatAttr(0.0f)),
                                   fqn)
                    .getResult()
              : GlobalNormOp::create(b, loc, group, fqn, b.getUnitAttr()).getResult();
      std::set<int16_t> axes = split;
      axes.insert(kPipelineAxis);
      part = shard::AllReduceOp::create(b, loc, part, grid,
                                        SmallVector<int16_t>(axes.begin(), axes.end()),
                                        shard::ReductionKind::Sum);
      squares = squares ? AddOp::create(b, loc, squares, part, fqn).getResult() : part;
    }
    Value norm = mean(b, loc, SqrtOp::create(b, loc, squares, fqn), kGradNormOutput);
    StepResults results;
    SmallVector<std::string> modules;
    for (const Param &p : params)
      modules.push_back(p.module);
    emitAdamW(b, loc, train, args, grads, modules, clipCoef(b, loc, norm), results);
    results.add(norm, tag(b, kOutputAttr, kGradNormOutput));
    finish(b, loc, train, args, results);
    // Each parameter, its moments and its gradient are stored as the stages
    // store the parameter: the update says so, as a partitioned step does.
    auto keyOf = [](DictionaryAttr attrs) -> std::string {
      for (StringRef role : {kParamAttr, kGradAttr})
        if (auto s = attrs.getAs<StringAttr>(role))
          return s.str();
      if (auto s = attrs.getAs<StringAttr>(kStateAttr))
        for (StringRef prefix : {"exp_avg_sq.", "exp_avg."})
          if (s.getValue().starts_with(prefix))
            return s.getValue().drop_front(prefix.size()).str();
      return "";
    };
    for (unsigned i = 0; i < train.getNumArguments(); ++i)
      if (auto it = shardingOf.find(keyOf(train.getArgAttrDict(i))); it != shardingOf.end())
        train.setArgAttr(i, kShardingAttr, it->second);
    for (unsigned i = 0; i < train.getNumResults(); ++i)
      if (auto it = shardingOf.find(keyOf(train.getResultAttrDict(i))); it != shardingOf.end())
        train.setResultAttr(i, kShardingAttr, it->second);
    return success();
  }

  /// The pipeline grid axis: the first of the grid kiln-optimizer makes.
  static constexpr int16_t kPipelineAxis = 0;

  /// The name of the grid whose axis 0 is `pp` of pipeline-degree ranks:
  /// made ([P], axis "pp") when the module has none; empty after an error
  /// when the module's grid is another.
  std::string pipelineGrid(OpBuilder &b, ModuleOp module) {
    SmallVector<std::string> axes = gridAxisNames(module);
    if (axes.empty()) {
      shard::GridOp::create(b, module.getLoc(), b.getStringAttr("grid"),
                            b.getDenseI64ArrayAttr({pipelineDegree}));
      module->setAttr(kGridAxesAttr, b.getStrArrayAttr({"pp"}));
      return "grid";
    }
    auto grids = module.getOps<shard::GridOp>();
    if (axes.front() != "pp" || grids.empty() ||
        (*grids.begin()).getShape().front() != pipelineDegree) {
      module.emitError() << "kiln-optimizer: pipeline-degree=" << int64_t(pipelineDegree)
                         << " needs the grid's first axis to be 'pp' of that size";
      return "";
    }
    return (*grids.begin()).getSymName().str();
  }

  /// The module owning a parameter (kiln::owningModule).
  static std::string moduleOf(Value param) {
    StringRef module = owningModule(param);
    return module.empty() ? "optimizer" : module.str();
  }
};

} // namespace
