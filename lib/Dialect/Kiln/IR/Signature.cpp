//===- Signature.cpp - Roles of a function's arguments and results --------===//

#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace kiln {

namespace {
std::string roleKey(StringRef role, StringRef name) {
  return (role + Twine('\0') + name).str();
}
} // namespace

std::string expAvgName(StringRef key) { return ("exp_avg." + key).str(); }
std::string expAvgSqName(StringRef key) { return ("exp_avg_sq." + key).str(); }
std::string expertBiasName(StringRef routerFqn) { return ("expert_bias." + routerFqn).str(); }

FailureOr<Signature> Signature::get(func::FuncOp fn) {
  if (fn.isExternal())
    return fn.emitError() << "@" << fn.getName() << " is a declaration; a body is needed";
  Signature s;
  s.fn_ = fn;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    bool tagged = false;
    for (auto [role, list] : {std::pair{kParamAttr, &s.params_}, std::pair{kInputAttr, &s.inputs_},
                              std::pair{kStateAttr, &s.state_}, std::pair{kGradAttr, &s.grads_}}) {
      auto name = fn.getArgAttrOfType<StringAttr>(i, role);
      if (!name)
        continue;
      int64_t microbatch = 0;
      if (auto attr = fn.getArgAttrOfType<IntegerAttr>(i, kMicrobatchAttr))
        microbatch = attr.getInt();
      list->push_back({i, name.str(), microbatch});
      if (microbatch == 0)
        s.arguments_[roleKey(role, name.getValue())] = i;
      tagged = true;
    }
    for (StringLiteral role : {kTransferAttr, kCotangentAttr, kResidualAttr})
      if (auto number = fn.getArgAttrOfType<IntegerAttr>(i, role)) {
        s.activations_.push_back({i, (role + " " + Twine(number.getInt())).str(), 0});
        tagged = true;
      }
    if (!tagged)
      return fn.emitError() << "@" << fn.getName() << ": argument #" << i
                            << " has no role: tag it '" << kParamAttr << "', '" << kStateAttr
                            << "', '" << kInputAttr << "' or '" << kGradAttr
                            << "' (or, in a pipeline stage, '" << kTransferAttr << "', '"
                            << kCotangentAttr << "' or '" << kResidualAttr << "')";
  }
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    for (StringLiteral role : {kParamAttr, kStateAttr, kGradAttr, kOutputAttr})
      if (auto name = fn.getResultAttrOfType<StringAttr>(i, role))
        s.results_[roleKey(role, name.getValue())] = i;
  return s;
}

std::optional<unsigned> Signature::argument(StringRef role, StringRef name) const {
  auto it = arguments_.find(roleKey(role, name));
  return it == arguments_.end() ? std::nullopt : std::optional<unsigned>(it->second);
}

std::optional<unsigned> Signature::result(StringRef role, StringRef name) const {
  auto it = results_.find(roleKey(role, name));
  return it == results_.end() ? std::nullopt : std::optional<unsigned>(it->second);
}

FailureOr<TrainStepSignature> TrainStepSignature::get(func::FuncOp fn) {
  FailureOr<Signature> s = Signature::get(fn);
  if (failed(s))
    return failure();
  auto missing = [&](StringRef what, StringRef role, StringRef name) {
    return fn.emitError() << "@" << fn.getName() << " is not a training step: no " << what
                          << " tagged " << role << " = \"" << name << "\"";
  };
  TrainStepSignature t;
  for (const Signature::Slot &p : s->params()) {
    Param param;
    param.key = p.name;
    param.arg = p.index;
    std::string m = expAvgName(p.name), v = expAvgSqName(p.name);
    std::optional<unsigned> result = s->result(kParamAttr, p.name),
                            mArg = s->argument(kStateAttr, m),
                            mResult = s->result(kStateAttr, m),
                            vArg = s->argument(kStateAttr, v),
                            vResult = s->result(kStateAttr, v);
    if (!result)
      return missing("result", kParamAttr, p.name);
    if (!mArg || !vArg)
      return missing("argument", kStateAttr, mArg ? v : m);
    if (!mResult || !vResult)
      return missing("result", kStateAttr, mResult ? v : m);
    param.result = *result;
    param.expAvgArg = *mArg;
    param.expAvgResult = *mResult;
    param.expAvgSqArg = *vArg;
    param.expAvgSqResult = *vResult;
    t.params.push_back(std::move(param));
  }
  std::optional<unsigned> stepArg = s->argument(kStateAttr, kStepState),
                          stepResult = s->result(kStateAttr, kStepState),
                          loss = s->result(kOutputAttr, kLossOutput),
                          norm = s->result(kOutputAttr, kGradNormOutput);
  if (!stepArg)
    return missing("argument", kStateAttr, kStepState);
  if (!stepResult)
    return missing("result", kStateAttr, kStepState);
  if (!loss)
    return missing("result", kOutputAttr, kLossOutput);
  if (!norm)
    return missing("result", kOutputAttr, kGradNormOutput);
  t.stepArg = *stepArg;
  t.stepResult = *stepResult;
  t.lossResult = *loss;
  t.gradNormResult = *norm;
  t.inputs.assign(s->inputs().begin(), s->inputs().end());
  t.metrics = metricOutputs(fn);
  llvm::StringSet<> known{kStepState};
  for (const Param &p : t.params) {
    known.insert(expAvgName(p.key));
    known.insert(expAvgSqName(p.key));
  }
  for (const Signature::Slot &state : s->state()) {
    if (known.contains(state.name))
      continue;
    std::optional<unsigned> result = s->result(kStateAttr, state.name);
    if (!result)
      return missing("result", kStateAttr, state.name);
    t.otherState.push_back({state.name, state.index, *result});
  }
  return t;
}

SmallVector<Signature::Slot> metricOutputs(func::FuncOp fn) {
  SmallVector<Signature::Slot> metrics;
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (auto name = fn.getResultAttrOfType<StringAttr>(i, kOutputAttr))
      if (name.getValue() != kLossOutput && name.getValue() != kGradNormOutput)
        metrics.push_back({i, name.str()});
  return metrics;
}

} // namespace kiln
