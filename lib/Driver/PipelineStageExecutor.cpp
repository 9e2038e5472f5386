//===- PipelineStageExecutor.cpp - Stage functions run as scheduled -------===//

#include "kiln/Driver/PipelineStageExecutor.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Driver/PipelineStageFunctions.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <fmt/format.h>

namespace kiln {

namespace {

int64_t numberOf(mlir::func::FuncOp fn, unsigned i, llvm::StringRef attr, bool result) {
  auto n = llvm::dyn_cast_if_present<mlir::IntegerAttr>(result ? fn.getResultAttr(i, attr)
                                                               : fn.getArgAttr(i, attr));
  return n ? n.getInt() : -1;
}

void addInto(TensorMap &sums, const std::string &key, const Tensor &value) {
  auto [it, added] = sums.emplace(key, value.toF32()); // a copy of its own
  if (added)
    return;
  Tensor f32 = value.toF32();
  float *sum = it->second.mutableData<float>();
  const float *add = f32.data<float>();
  for (int64_t i = 0; i < f32.numel(); ++i)
    sum[i] += add[i];
}

} // namespace

PipelineStageExecutor::PipelineStageExecutor(mlir::ModuleOp module, int64_t numStages,
                                             TensorMap parameters,
                                             std::vector<InputsAndLabels> microbatches,
                                             const ExecutionContext &execution)
    : module_(module), numStages_(numStages), parameters_(std::move(parameters)),
      microbatches_(std::move(microbatches)), execution_(execution) {}

std::vector<int64_t> PipelineStageExecutor::transferNumbers(int64_t b) const {
  mlir::func::FuncOp fn = stageFunction(module_, b, "forward");
  std::vector<int64_t> numbers;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (int64_t n = numberOf(fn, i, kTransferAttr, true); n >= 0)
      numbers.push_back(n);
  return numbers;
}

PipelineStageCalls PipelineStageExecutor::calls() {
  PipelineStageCalls calls;
  calls.forward = [this](int64_t s, int64_t m, std::vector<Tensor> in) {
    return forward(s, m, std::move(in));
  };
  calls.backward = [this](int64_t s, int64_t m, std::vector<Tensor> in) {
    return backward(s, m, std::move(in));
  };
  calls.transfers = [this](int64_t b) {
    mlir::func::FuncOp fn = stageFunction(module_, b, "forward");
    std::vector<std::pair<DType, Shape>> types;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (numberOf(fn, i, kTransferAttr, true) >= 0) {
        mlir::Type type = fn.getResultTypes()[i];
        types.push_back({computeDType(type), shapeOf(type)});
      }
    return types;
  };
  return calls;
}

std::vector<Tensor>
PipelineStageExecutor::argumentsOf(mlir::func::FuncOp fn, int64_t m, const Kept &kept,
                                   const std::map<int64_t, Tensor> &cotangents) const {
  const InputsAndLabels &data = microbatches_.at(m);
  std::vector<Tensor> args;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    if (auto key = fn.getArgAttrOfType<mlir::StringAttr>(i, kParamAttr))
      args.push_back(parameters_.at(key.str()));
    else if (auto name = fn.getArgAttrOfType<mlir::StringAttr>(i, kInputAttr))
      args.push_back(name.getValue() == "labels" ? data.labels : data.inputIds);
    else if (int64_t r = numberOf(fn, i, kResidualAttr, false); r >= 0)
      args.push_back(kept.residuals.at(r));
    else if (int64_t t = numberOf(fn, i, kTransferAttr, false); t >= 0)
      args.push_back(kept.received.at(t));
    else
      args.push_back(cotangents.at(numberOf(fn, i, kCotangentAttr, false)));
  }
  return args;
}

std::vector<Tensor> PipelineStageExecutor::forward(int64_t s, int64_t m,
                                                   std::vector<Tensor> received) {
  mlir::func::FuncOp fn = stageFunction(module_, s, "forward");
  Kept &kept = kept_[{s, m}];
  if (s > 0) {
    std::vector<int64_t> numbers = transferNumbers(s - 1);
    for (size_t i = 0; i < numbers.size(); ++i)
      kept.received[numbers[i]] = received.at(i);
  }
  std::vector<Tensor> results = runFunction(fn, argumentsOf(fn, m, kept, {}), nullptr, execution_);
  std::vector<Tensor> sent;
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    if (numberOf(fn, i, kTransferAttr, true) >= 0)
      sent.push_back(results[i]);
    else if (int64_t r = numberOf(fn, i, kResidualAttr, true); r >= 0)
      kept.residuals[r] = results[i];
    else if (auto output = fn.getResultAttrOfType<mlir::StringAttr>(i, kOutputAttr);
             output && output.getValue() == kLossOutput)
      losses_[m] = results[i].toF32().data<float>()[0];
  }
  return sent;
}

std::vector<Tensor> PipelineStageExecutor::backward(int64_t s, int64_t m,
                                                    std::vector<Tensor> cotangents) {
  mlir::func::FuncOp fn = stageFunction(module_, s, "backward");
  Kept kept = std::move(kept_.at({s, m}));
  kept_.erase({s, m});
  std::map<int64_t, Tensor> cotangentOf;
  if (s + 1 < numStages_) {
    std::vector<int64_t> numbers = transferNumbers(s);
    for (size_t i = 0; i < numbers.size(); ++i)
      cotangentOf[numbers[i]] = cotangents.at(i);
  }
  std::vector<Tensor> results =
      runFunction(fn, argumentsOf(fn, m, kept, cotangentOf), nullptr, execution_);
  std::map<int64_t, Tensor> back;
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    if (auto key = fn.getResultAttrOfType<mlir::StringAttr>(i, kGradAttr))
      addInto(gradients_, key.str(), results[i]);
    else if (int64_t c = numberOf(fn, i, kCotangentAttr, true); c >= 0)
      back[c] = results[i];
  }
  std::vector<Tensor> sent;
  if (s > 0)
    for (int64_t n : transferNumbers(s - 1)) {
      auto it = back.find(n);
      if (it == back.end())
        fail("pipeline: @loss_stage{}_backward gives no cotangent of transfer {}", s, n);
      sent.push_back(it->second);
    }
  return sent;
}

} // namespace kiln
