//===- PipelineTraining.cpp - One pipeline rank's training steps ----------===//

#include "kiln/Driver/PipelineTraining.h"
#include "kiln/Backend/CPU/CollectiveKernels.h"
#include "kiln/Backend/CPU/PipelineRunner.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Driver/PipelineStageExecutor.h"
#include "kiln/Driver/PipelineStageFunctions.h"
#include "kiln/Driver/RankSlices.h"
#include "kiln/Driver/Training.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include <set>

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
  // Partitioned stages (FSDP, HSDP, TP, EP inside a stage) split every
  // microbatch over the data-parallel axes; unpartitioned ones run whole,
  // and replicas of the whole pipeline (dp_replicate) each take their rows.
  partitioned_ = options.worldSize() > 1;
  for (size_t a = 1; a < grid.shape().size(); ++a) {
    const std::string &name = grid.axisNames()[a];
    if (grid.shape()[a] == 1 || partitioned_)
      continue;
    if (name != "dp_replicate")
      fail("pipeline training: grid axis '{}' has {} ranks, but the stage functions are not "
           "partitioned (capture them with the run's layout without pp; replicas of whole "
           "stages are data_parallel_replicate_degree)",
           name, grid.shape()[a]);
    replicaAxes_.push_back(int16_t(a));
    replicas_ *= grid.shape()[a];
    replica_ = replica_ * grid.shape()[a] + grid.coordinates()[a];
  }
  rowGroups_ = partitioned_ ? layout.dataParallelDegree() : replicas_;
  sequence_ = layout.sequenceLayout();
  pipelineRank_ = grid.coordinates()[ppAxis];
  execution_.grid = &grid;
  execution_.rank = grid.rank();
  execution_.worldSize = int(layout.worldSize());

  module_ = captureStageFunctions(context_, model, layout, seq, options);
  // The update's all-reduces run on the run's grid; partitioned stages
  // already reduced their gradients over every data-parallel rank.
  update_ = addPipelineUpdate(*module_, options, schedule_.microbatches * accumulation_ * replicas_,
                              layout.pp, pipelineRank_, grid.shape(), grid.axisNames(),
                              std::vector<int64_t>(replicaAxes_.begin(), replicaAxes_.end()));

  // Whole types from @loss; how the stages split parameters and inputs
  // from their forwards' arguments.
  std::map<std::string, mlir::Type> whole;
  auto loss = module_->lookupSymbol<mlir::func::FuncOp>("loss");
  if (!loss)
    fail("pipeline stage functions: no @loss");
  for (unsigned i = 0; i < loss.getNumArguments(); ++i)
    if (auto key = loss.getArgAttrOfType<mlir::StringAttr>(i, kParamAttr))
      whole[key.str()] = loss.getArgumentTypes()[i];
  for (int64_t s = 0; s < numStages_; ++s) {
    mlir::func::FuncOp forward = stageFunction(*module_, s, "forward");
    for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
      std::optional<Sharding> sharding = argSharding(forward, i);
      if (!sharding || sharding->isReplicated())
        continue;
      if (auto key = forward.getArgAttrOfType<mlir::StringAttr>(i, kParamAttr))
        shardings_[key.str()] = *sharding;
      else if (auto name = forward.getArgAttrOfType<mlir::StringAttr>(i, kInputAttr))
        inputShardings_[name.str()] = *sharding;
    }
  }

  sig_ = *Signature::get(update_);
  const Signature &sig = sig_;
  state_.resize(update_.getNumArguments());
  for (const Signature::Slot &p : sig.params()) {
    auto type = whole.find(p.name);
    if (type == whole.end())
      fail("pipeline stage functions: @loss takes no parameter '{}'", p.name);
    state_[p.index] =
        initial(p.name, type->second, [&](Tensor t) { return sliceOf(p.name, std::move(t)); });
    Shape shape = state_[p.index].shape();
    for (const std::string &name : {expAvgName(p.name), expAvgSqName(p.name)})
      state_[*sig.argument(kStateAttr, name)] = Tensor(DType::F32, shape);
  }
  Tensor step(DType::I64, {});
  state_[*sig.argument(kStateAttr, kStepState)] = step;

  for (auto &[key, users] : pipelineRanksUsing(*module_, numStages_, layout.pp)) {
    owners_[key] = {*users.ranks.begin(), users.type, whole.at(key)};
    if (users.ranks.size() > 1 && users.ranks.count(pipelineRank_))
      shared_[key] = std::vector<int64_t>(users.ranks.begin(), users.ranks.end());
  }
  openGroups();
}

Tensor PipelineTraining::sliceOf(const std::string &key, Tensor value) const {
  auto it = shardings_.find(key);
  return it == shardings_.end() ? value : rankSlice(grid_, it->second, std::move(value));
}

void PipelineTraining::openGroups() {
  // Every rank's groups (its update's differ), in one order on all.
  std::set<std::vector<int16_t>> groups = collectiveGroups(*module_);
  groups.insert({ppAxis_});
  std::vector<int16_t> lossAxes = {ppAxis_};
  lossAxes.insert(lossAxes.end(), replicaAxes_.begin(), replicaAxes_.end());
  groups.insert(lossAxes);
  if (!replicaAxes_.empty())
    groups.insert(replicaAxes_);
  std::string mine;
  for (const std::vector<int16_t> &axes : groups) {
    for (int16_t a : axes)
      mine += std::to_string(a) + ",";
    mine += ";";
  }
  std::set<std::vector<int16_t>> all;
  for (const std::string &text : MpiWorld::get().allGatherText(mine)) {
    std::vector<int16_t> axes;
    std::string number;
    for (char c : text) {
      if (c == ',') {
        axes.push_back(int16_t(std::stoi(number)));
        number.clear();
      } else if (c == ';') {
        all.insert(axes);
        axes.clear();
      } else {
        number += c;
      }
    }
  }
  for (const std::vector<int16_t> &axes : all)
    grid_.openGroup(axes);
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

std::vector<InputsAndLabels>
PipelineTraining::runMicrobatches(const std::vector<InputsAndLabels> &pieces, int64_t run) const {
  std::vector<InputsAndLabels> microbatches;
  for (int64_t j = 0; j < schedule_.microbatches; ++j) {
    if (!partitioned_) {
      microbatches.push_back(
          microbatchPiece(pieces, run, replica_, j, rowGroups_, schedule_.microbatches));
      continue;
    }
    // Microbatch j over every data-parallel rank: each group's piece j, as
    // a replica would run it; this rank binds its slice.
    InputsAndLabels global = stackedMicrobatch(pieces, run, j, rowGroups_, schedule_.microbatches);
    for (auto [name, part] : {std::pair<std::string, Tensor InputsAndLabels::*>{
                                  "input_ids", &InputsAndLabels::inputIds},
                              {"labels", &InputsAndLabels::labels}})
      if (auto sharding = inputShardings_.find(name); sharding != inputShardings_.end())
        global.*part =
            rankSlice(grid_, sharding->second, laidOutSequence(std::move(global.*part), sequence_));
    microbatches.push_back(std::move(global));
  }
  return microbatches;
}

double PipelineTraining::runSchedules(const Tensor &tokens, bool forwards, TensorMap *grads) {
  TensorMap params;
  for (const Signature::Slot &p : sig_.params())
    params.emplace(p.name, state_[p.index]);
  PipelineSchedule schedule = forwards ? forwardOnly(schedule_) : schedule_;
  // Each schedule run's rows split over the row groups, as one rank's
  // accumulated step splits each microbatch over its data-parallel ranks.
  int64_t runMicrobatchCount = schedule_.microbatches * accumulation_;
  std::vector<InputsAndLabels> pieces = splitMicrobatches(tokens, runMicrobatchCount * rowGroups_);
  float loss = 0; // the last stage's, on its ranks
  for (int64_t run = 0; run < accumulation_; ++run) {
    PipelineStageExecutor executor(*module_, numStages_, params, runMicrobatches(pieces, run),
                                   execution_);
    runPipelineSchedule(schedule, pipelineRank_, executor.calls(), grid_, ppAxis_);
    if (grads)
      for (const auto &[key, grad] : executor.gradients())
        (*grads)[key] = run == 0 ? grad : kernels::add(std::move((*grads)[key]), grad);
    // A partitioned microbatch's loss is already its mean over every
    // data-parallel rank's rows.
    for (const auto &[m, value] : executor.losses())
      loss += value / float(runMicrobatchCount * replicas_);
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
  // The sum over the step's microbatches of each one's mean-loss gradient
  // (a partitioned microbatch's over every data-parallel rank's rows).
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
  // In key order on every rank: the owner's slices gathered whole over its
  // data-parallel ranks (the others gather zeros alike, so every rank runs
  // the same collectives), then summed with zeros over pp.
  for (const auto &[key, owner] : owners_) {
    std::vector<std::string> names = {key};
    if (optimizer)
      names = {expAvgName(key), expAvgSqName(key)};
    for (const std::string &name : names) {
      Tensor part = owner.rank == pipelineRank_ ? mine.at(name).toF32()
                                                : Tensor(DType::F32, shapeOf(owner.local));
      auto sharding = shardings_.find(key);
      if (sharding != shardings_.end())
        part = wholeFromSlices(grid_, sharding->second, std::move(part), shapeOf(owner.whole));
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
      expected[name] = shapeOf(owner.whole);
  checkOptimizerStateFile(file, step, expected);
  // Each moment split as its parameter is.
  std::map<std::string, std::string> parameterOf;
  for (const Signature::Slot &p : sig_.params())
    for (const std::string &name : {expAvgName(p.name), expAvgSqName(p.name)})
      parameterOf[name] = p.name;
  for (const Signature::Slot &s : sig_.state()) {
    if (s.name == kStepState) {
      state_[s.index] = Tensor(DType::I64, {});
      continue;
    }
    Tensor value = file.get(s.name).to(DType::F32); // an owned copy
    auto key = parameterOf.find(s.name);
    state_[s.index] = key == parameterOf.end() ? value : sliceOf(key->second, std::move(value));
  }
  *state_[*sig_.argument(kStateAttr, kStepState)].mutableData<int64_t>() = step;
}

} // namespace kiln
