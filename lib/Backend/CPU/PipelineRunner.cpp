//===- PipelineRunner.cpp - A pipeline schedule run on MPI ranks ----------===//

#include "kiln/Backend/CPU/PipelineRunner.h"
#include "kiln/Support/Error.h"

#include <algorithm>
#include <map>

namespace kiln {

namespace {

/// A message's tag: which way, to which stage, which microbatch, which of
/// the boundary's tensors; unique within a step, so the order in which a
/// rank receives never depends on the order in which another sent.
struct Tags {
  int64_t stages, microbatches, perBoundary;
  int tag(bool gradient, int64_t toStage, int64_t m, size_t i) const {
    return int(((m * stages + toStage) * 2 + gradient) * perBoundary + int64_t(i));
  }
};

void checkCount(const std::vector<Tensor> &tensors, size_t expected, const char *what,
                int64_t stage, int64_t m) {
  if (tensors.size() != expected)
    fail("pipeline: stage {}'s {} of microbatch {} gave {} tensors where {} cross", stage, what, m,
         tensors.size(), expected);
}

} // namespace

void runPipelineSchedule(const PipelineSchedule &schedule, int64_t pipelineRank,
                         const PipelineStageCalls &calls, DeviceGrid &grid, int16_t ppAxis) {
  int64_t stages = schedule.numStages();
  std::vector<std::vector<std::pair<DType, Shape>>> crossing;
  size_t widest = 1;
  for (int64_t b = 0; b + 1 < stages; ++b) {
    crossing.push_back(calls.transfers(b));
    widest = std::max(widest, crossing.back().size());
  }
  Tags tags{stages, schedule.microbatches, int64_t(widest)};
  if (tags.tag(true, stages - 1, schedule.microbatches - 1, widest - 1) > DeviceGrid::maxTag())
    fail("pipeline: {} stages x {} microbatches x {} transfers need more message tags than "
         "MPI's {}",
         stages, schedule.microbatches, widest, DeviceGrid::maxTag());

  using Key = std::pair<int64_t, int64_t>; // (stage, microbatch)
  std::map<Key, std::vector<Tensor>> inbox, outbox;
  for (const PipelineAction &a : schedule.ranks.at(pipelineRank)) {
    Key key{a.stage, a.microbatch};
    int64_t peer = schedule.rankOf(a.peerStage());
    bool gradient =
        a.kind == PipelineActionKind::SendGradient || a.kind == PipelineActionKind::RecvGradient;
    switch (a.kind) {
    case PipelineActionKind::RecvActivation:
    case PipelineActionKind::RecvGradient: {
      // Activations from stage s - 1 cross boundary s - 1; cotangents from
      // stage s + 1 cross boundary s.
      const auto &types = crossing[gradient ? a.stage : a.stage - 1];
      std::vector<Tensor> &into = inbox[key];
      for (size_t i = 0; i < types.size(); ++i)
        into.push_back(grid.recv(types[i].first, types[i].second, ppAxis, peer,
                                 tags.tag(gradient, a.stage, a.microbatch, i)));
      break;
    }
    case PipelineActionKind::Forward:
    case PipelineActionKind::Backward: {
      bool forward = a.kind == PipelineActionKind::Forward;
      std::vector<Tensor> in = std::move(inbox[key]);
      inbox.erase(key);
      std::vector<Tensor> out = forward ? calls.forward(a.stage, a.microbatch, std::move(in))
                                        : calls.backward(a.stage, a.microbatch, std::move(in));
      bool sends = forward ? a.stage + 1 < stages : a.stage > 0;
      checkCount(out, sends ? crossing[forward ? a.stage : a.stage - 1].size() : 0,
                 forward ? "forward" : "backward", a.stage, a.microbatch);
      outbox[key] = std::move(out);
      break;
    }
    case PipelineActionKind::SendActivation:
    case PipelineActionKind::SendGradient: {
      std::vector<Tensor> out = std::move(outbox[key]);
      outbox.erase(key);
      for (size_t i = 0; i < out.size(); ++i)
        grid.isend(std::move(out[i]), ppAxis, peer,
                   tags.tag(gradient, a.peerStage(), a.microbatch, i));
      break;
    }
    }
  }
  grid.waitSends();
}

Tensor sumOverPipelineRanks(Tensor value, const std::vector<int64_t> &holders, int64_t pipelineRank,
                            DeviceGrid &grid, int16_t ppAxis, int tag) {
  if (value.dtype() != DType::F32)
    fail("pipeline: a sum over pipeline ranks takes f32 tensors, got {}", dtypeName(value.dtype()));
  if (holders.empty() || !std::is_sorted(holders.begin(), holders.end()) ||
      std::find(holders.begin(), holders.end(), pipelineRank) == holders.end())
    fail("pipeline: pipeline rank {} sums a tensor over ranks it is not among, in ascending "
         "order",
         pipelineRank);
  if (holders.size() == 1)
    return value;
  int64_t first = holders.front();
  Shape shape = value.shape();
  if (pipelineRank != first) {
    grid.isend(std::move(value), ppAxis, first, tag);
    grid.waitSends();
    return grid.recv(DType::F32, shape, ppAxis, first, tag);
  }
  Tensor sum(DType::F32, shape);
  float *out = sum.mutableData<float>();
  for (size_t h = 0; h < holders.size(); ++h) {
    Tensor part = h == 0 ? value : grid.recv(DType::F32, shape, ppAxis, holders[h], tag);
    const float *in = part.data<float>();
    for (int64_t i = 0; i < sum.numel(); ++i)
      out[i] += in[i];
  }
  for (size_t h = 1; h < holders.size(); ++h)
    grid.isend(sum, ppAxis, holders[h], tag);
  grid.waitSends();
  return sum;
}

} // namespace kiln
