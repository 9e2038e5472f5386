//===- PipelineTraining.cpp - One pipeline rank's training steps ----------===//

#include "kiln/Driver/PipelineTraining.h"
#include "kiln/Backend/CPU/PipelineRunner.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Driver/PipelineStageExecutor.h"
#include "kiln/Driver/PipelineStageFunctions.h"
#include "kiln/Driver/Training.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

namespace kiln {

namespace {

Tensor scalar(float value) {
  Tensor t(DType::F32, {});
  *t.mutableData<float>() = value;
  return t;
}

} // namespace

PipelineTraining::PipelineTraining(const Qwen3Config &model, const ParallelLayout &layout,
                                   int64_t localBatch, int64_t accumulation, int64_t seq,
                                   const KilnPipelineOptions &options, DeviceGrid &grid,
                                   int16_t ppAxis, const ParameterSource &initial)
    : grid_(grid), ppAxis_(ppAxis), numStages_(layout.stages.numStages()),
      accumulation_(accumulation), schedule_(layout.pipelineSchedule(localBatch)) {
  if (ppAxis != 0 || grid.shape().empty() || grid.shape()[0] != layout.pp)
    fail("pipeline training: the grid's first axis must be the pipeline's {} ranks", layout.pp);
  // Replicas of the whole pipeline (dp_replicate) each take their rows;
  // stages do not partition over the other axes yet.
  for (size_t a = 1; a < grid.shape().size(); ++a) {
    if (grid.shape()[a] == 1)
      continue;
    if (grid.axisNames()[a] != "dp_replicate")
      fail("pipeline training: grid axis '{}' has {} ranks, but stages do not yet partition "
           "over it (FSDP, TP and EP inside a stage are not built; replicas of the pipeline "
           "are data_parallel_replicate_degree)",
           grid.axisNames()[a], grid.shape()[a]);
    replicaAxes_.push_back(int16_t(a));
    replicas_ *= grid.shape()[a];
    replica_ = replica_ * grid.shape()[a] + grid.coordinates()[a];
  }
  pipelineRank_ = grid.coordinates()[ppAxis];
  execution_.grid = &grid;
  execution_.rank = grid.rank();
  execution_.worldSize = int(layout.worldSize());

  module_ = captureStageFunctions(context_, model, layout, seq, options);
  // The update's all-reduces run on the run's grid.
  update_ = addPipelineUpdate(*module_, options, schedule_.microbatches * accumulation_ * replicas_,
                              layout.pp, pipelineRank_, grid.shape(), grid.axisNames(),
                              std::vector<int64_t>(replicaAxes_.begin(), replicaAxes_.end()));

  sig_ = *Signature::get(update_);
  const Signature &sig = sig_;
  state_.resize(update_.getNumArguments());
  for (const Signature::Slot &p : sig.params()) {
    mlir::Type type = update_.getArgumentTypes()[p.index];
    state_[p.index] = initial(p.name, type);
    Shape shape = state_[p.index].shape();
    for (const std::string &name : {expAvgName(p.name), expAvgSqName(p.name)})
      state_[*sig.argument(kStateAttr, name)] = Tensor(DType::F32, shape);
  }
  Tensor step(DType::I64, {});
  state_[*sig.argument(kStateAttr, kStepState)] = step;

  for (auto &[key, users] : pipelineRanksUsing(*module_, numStages_, layout.pp)) {
    owners_[key] = {*users.ranks.begin(), users.type};
    if (users.ranks.size() > 1 && users.ranks.count(pipelineRank_))
      shared_[key] = std::vector<int64_t>(users.ranks.begin(), users.ranks.end());
  }
}

PipelineTraining::StepResult PipelineTraining::step(const Tensor &tokens) {
  const Signature &sig = sig_;
  TensorMap grads;
  double loss = runSchedules(tokens, false, &grads);

  for (const Signature::Slot &g : sig.grads())
    if (!grads.count(g.name))
      fail("pipeline rank {}: its stages computed no gradient of '{}'", pipelineRank_, g.name);
  // The state moves in, so AdamW overwrites the weights and moments in place.
  std::vector<Tensor> args = std::move(state_);
  state_.clear();
  for (const Signature::Slot &g : sig.grads())
    args[g.index] = std::move(grads[g.name]);
  std::vector<Tensor> results, unused;
  try {
    results = runFunction(update_, std::move(args), nullptr, execution_, &unused);
  } catch (const Error &) {
    // Failed before overwriting any of the state: keep it (as the Trainer
    // does), else it is gone (stateLost()).
    bool intact = true;
    for (const Signature::Slot &slot : sig.params())
      intact &= unused[slot.index].defined();
    for (const Signature::Slot &slot : sig.state())
      intact &= unused[slot.index].defined();
    if (intact) {
      for (const Signature::Slot &g : sig.grads())
        unused[g.index] = Tensor();
      state_ = std::move(unused);
    }
    throw;
  }
  state_.resize(update_.getNumArguments());

  for (const Signature::Slot &p : sig.params()) {
    state_[p.index] = results[*sig.result(kParamAttr, p.name)];
    for (const std::string &name : {expAvgName(p.name), expAvgSqName(p.name)})
      state_[*sig.argument(kStateAttr, name)] = results[*sig.result(kStateAttr, name)];
  }
  state_[*sig.argument(kStateAttr, kStepState)] = results[*sig.result(kStateAttr, kStepState)];

  StepResult r;
  r.loss = loss;
  r.gradNorm = *results[*sig.result(kOutputAttr, kGradNormOutput)].data<float>();
  return r;
}

double PipelineTraining::runSchedules(const Tensor &tokens, bool forwards, TensorMap *grads) {
  TensorMap params;
  for (const Signature::Slot &p : sig_.params())
    params.emplace(p.name, state_[p.index]);
  PipelineSchedule schedule = forwards ? forwardOnly(schedule_) : schedule_;
  // Each schedule run's rows split over the replicas, as one rank's
  // accumulated step splits each microbatch over its data-parallel ranks.
  int64_t m = schedule_.microbatches;
  std::vector<InputsAndLabels> microbatches =
      splitMicrobatches(tokens, m * accumulation_ * replicas_);
  float loss = 0; // the last stage's, on its rank
  for (int64_t run = 0; run < accumulation_; ++run) {
    auto first = microbatches.begin() + (run * replicas_ + replica_) * m;
    PipelineStageExecutor executor(
        *module_, numStages_, params,
        std::vector<InputsAndLabels>(first, first + schedule_.microbatches));
    runPipelineSchedule(schedule, pipelineRank_, executor.calls(), grid_, ppAxis_);
    if (grads)
      for (const auto &[key, grad] : executor.gradients())
        (*grads)[key] = run == 0 ? grad : kernels::add(std::move((*grads)[key]), grad);
    for (const auto &[m, value] : executor.losses())
      loss += value / float(microbatches.size());
  }
  // Every rank walks the shared parameters in one (key) order.
  int tag = 0;
  if (grads)
    for (const auto &[key, holders] : shared_)
      (*grads)[key] = sumOverPipelineRanks(std::move((*grads)[key]), holders, pipelineRank_, grid_,
                                           ppAxis_, tag++);
  // The loss is the last stage's; its rank shares it, and the replicas
  // their means.
  std::vector<int16_t> axes = {ppAxis_};
  axes.insert(axes.end(), replicaAxes_.begin(), replicaAxes_.end());
  return *grid_.allReduce(scalar(loss), axes, Reduction::Sum).data<float>();
}

double PipelineTraining::evaluate(const std::vector<Tensor> &batches) {
  double sum = 0;
  for (const Tensor &tokens : batches)
    sum += runSchedules(tokens, true, nullptr);
  return batches.empty() ? 0.0 : sum / double(batches.size());
}

TensorMap PipelineTraining::parameters() const {
  TensorMap params;
  for (const Signature::Slot &p : sig_.params())
    params.emplace(p.name, state_[p.index]);
  return params;
}

TensorMap PipelineTraining::optimizerState() const {
  TensorMap state;
  for (const Signature::Slot &s : sig_.state())
    state.emplace(s.name, state_[s.index]);
  return state;
}

TensorMap PipelineTraining::gradients(const Tensor &tokens) {
  TensorMap grads;
  runSchedules(tokens, false, &grads);
  // The sum over the step's microbatches of each one's mean-loss gradient.
  float n = float(schedule_.microbatches * accumulation_ * replicas_);
  for (auto &[key, grad] : grads) {
    if (!replicaAxes_.empty())
      grad = grid_.allReduce(std::move(grad), replicaAxes_, Reduction::Sum);
    Tensor mean(DType::F32, grad.shape());
    for (int64_t i = 0; i < grad.numel(); ++i)
      mean.mutableData<float>()[i] = grad.data<float>()[i] / n;
    grad = std::move(mean);
  }
  return gatheredFrom(grads, false);
}

TensorMap PipelineTraining::gathered(bool optimizer) const {
  return gatheredFrom(optimizer ? optimizerState() : parameters(), optimizer);
}

TensorMap PipelineTraining::gatheredFrom(const TensorMap &mine, bool optimizer) const {
  TensorMap whole;
  // In key order on every rank; the owner's tensor summed with zeros.
  for (const auto &[key, owner] : owners_) {
    std::vector<std::string> names = {key};
    if (optimizer)
      names = {expAvgName(key), expAvgSqName(key)};
    for (const std::string &name : names) {
      Tensor part = owner.first == pipelineRank_ ? mine.at(name).toF32()
                                                 : Tensor(DType::F32, shapeOf(owner.second));
      whole.emplace(name, grid_.allReduce(std::move(part), {ppAxis_}, Reduction::Sum));
    }
  }
  return whole;
}

void PipelineTraining::restoreOptimizerState(const SafeTensorsFile &file, int64_t step) {
  // Every stage's moments, checked whole first: the state changes all at
  // once or not at all.
  std::map<std::string, Shape> expected;
  for (const auto &[key, owner] : owners_)
    for (const std::string &name : {expAvgName(key), expAvgSqName(key)})
      expected[name] = shapeOf(owner.second);
  checkOptimizerStateFile(file, step, expected);
  for (const Signature::Slot &s : sig_.state())
    state_[s.index] = s.name == kStepState ? Tensor(DType::I64, {})
                                           : file.get(s.name).to(DType::F32); // an owned copy
  *state_[*sig_.argument(kStateAttr, kStepState)].mutableData<int64_t>() = step;
}

} // namespace kiln
