//===- PipelineSchedule.cpp - A pipeline schedule as data ----------------===//

#include "kiln/Config/PipelineSchedule.h"

#include "kiln/Support/Error.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <tuple>

namespace kiln {

bool isSingleStageSchedule(PipelineScheduleKind schedule) {
  return schedule != PipelineScheduleKind::Interleaved1F1B;
}

int64_t PipelineAction::peerStage() const {
  switch (kind) {
  case PipelineActionKind::SendActivation:
  case PipelineActionKind::RecvGradient:
    return stage + 1;
  case PipelineActionKind::RecvActivation:
  case PipelineActionKind::SendGradient:
    return stage - 1;
  default:
    return stage;
  }
}

std::string PipelineAction::str() const {
  const char *name = "";
  switch (kind) {
  case PipelineActionKind::Forward:
    name = "F";
    break;
  case PipelineActionKind::Backward:
    name = "B";
    break;
  case PipelineActionKind::SendActivation:
    name = "SEND_F";
    break;
  case PipelineActionKind::RecvActivation:
    name = "RECV_F";
    break;
  case PipelineActionKind::SendGradient:
    name = "SEND_B";
    break;
  case PipelineActionKind::RecvGradient:
    name = "RECV_B";
    break;
  }
  return fmt::format("{}{}{}", stage, name, microbatch);
}

std::string PipelineSchedule::str(int64_t rank) const {
  std::string text;
  for (const PipelineAction &action : ranks[rank])
    text += action.str() + "\n";
  return text;
}

namespace {

using Kind = PipelineActionKind;

/// The compute actions of each schedule, before transfers are placed.
using ComputeOrder = std::vector<PipelineAction>;

ComputeOrder gpipeOrder(int64_t rank, int64_t microbatches) {
  ComputeOrder order;
  for (int64_t m = 0; m < microbatches; ++m)
    order.push_back({Kind::Forward, rank, m});
  for (int64_t m = 0; m < microbatches; ++m)
    order.push_back({Kind::Backward, rank, m});
  return order;
}

ComputeOrder oneFOneBOrder(int64_t rank, int64_t degree, int64_t microbatches) {
  int64_t warmup = std::min(microbatches, degree - rank - 1);
  ComputeOrder order;
  for (int64_t m = 0; m < warmup; ++m)
    order.push_back({Kind::Forward, rank, m});
  for (int64_t m = warmup; m < microbatches; ++m) {
    order.push_back({Kind::Forward, rank, m});
    order.push_back({Kind::Backward, rank, m - warmup});
  }
  for (int64_t m = microbatches - warmup; m < microbatches; ++m)
    order.push_back({Kind::Backward, rank, m});
  return order;
}

/// Forwards walk the rank's stages upwards a round of microbatches at a
/// time, backwards downwards; after the warm-up they alternate.
ComputeOrder interleavedOrder(int64_t rank, int64_t degree, int64_t stagesPerRank,
                              int64_t microbatches, int64_t perRound) {
  int64_t total = stagesPerRank * microbatches;
  int64_t warmup = std::min((stagesPerRank - 1) * perRound + 2 * (degree - rank - 1), total);
  std::map<int64_t, int64_t> nextForward, nextBackward; // stage -> microbatch
  auto forward = [&](int64_t k) -> PipelineAction {
    int64_t stage = (k / perRound) % stagesPerRank * degree + rank;
    return {Kind::Forward, stage, nextForward[stage]++};
  };
  auto backward = [&](int64_t j) -> PipelineAction {
    int64_t stage = (stagesPerRank - 1 - (j / perRound) % stagesPerRank) * degree + rank;
    return {Kind::Backward, stage, nextBackward[stage]++};
  };
  ComputeOrder order;
  for (int64_t k = 0; k < warmup; ++k)
    order.push_back(forward(k));
  for (int64_t k = warmup; k < total; ++k) {
    order.push_back(forward(k));
    order.push_back(backward(k - warmup));
  }
  for (int64_t j = total - warmup; j < total; ++j)
    order.push_back(backward(j));
  return order;
}

/// Each compute action with its transfers: a receive right before it, a
/// send right after.
std::vector<PipelineAction> withTransfers(const ComputeOrder &order, int64_t numStages) {
  std::vector<PipelineAction> actions;
  for (const PipelineAction &a : order) {
    bool forward = a.kind == Kind::Forward;
    bool receives = forward ? a.stage > 0 : a.stage < numStages - 1;
    bool sends = forward ? a.stage < numStages - 1 : a.stage > 0;
    if (receives)
      actions.push_back(
          {forward ? Kind::RecvActivation : Kind::RecvGradient, a.stage, a.microbatch});
    actions.push_back(a);
    if (sends)
      actions.push_back(
          {forward ? Kind::SendActivation : Kind::SendGradient, a.stage, a.microbatch});
  }
  return actions;
}

} // namespace

PipelineSchedule forwardOnly(const PipelineSchedule &schedule) {
  PipelineSchedule forwards = schedule;
  for (std::vector<PipelineAction> &actions : forwards.ranks)
    actions.erase(std::remove_if(actions.begin(), actions.end(),
                                 [](const PipelineAction &a) {
                                   return a.kind == PipelineActionKind::Backward ||
                                          a.kind == PipelineActionKind::SendGradient ||
                                          a.kind == PipelineActionKind::RecvGradient;
                                 }),
                  actions.end());
  return forwards;
}

PipelineSchedule buildPipelineSchedule(PipelineScheduleKind kind, int64_t degree,
                                       int64_t stagesPerRank, int64_t microbatches) {
  std::string_view name = wordOf(kind);
  if (degree < 2)
    fail("pipeline schedule {}: pipeline_parallel_degree must be >= 2, got {}", name, degree);
  if (microbatches < 1)
    fail("pipeline schedule {}: needs at least one microbatch, got {}", name, microbatches);
  bool looped = !isSingleStageSchedule(kind);
  if (looped ? stagesPerRank < 2 : stagesPerRank != 1)
    fail("pipeline schedule {} runs {} stages per rank, got {}", name,
         looped ? "at least 2" : "exactly 1", stagesPerRank);
  if (kind != PipelineScheduleKind::GPipe && microbatches < degree)
    fail("pipeline schedule {}: {} microbatches are fewer than the {} pipeline ranks; {} needs "
         "at least one per rank (raise training.local_batch_size or lower "
         "parallelism.pipeline_parallel_microbatch_size)",
         name, microbatches, degree, name);
  int64_t rounds = std::max<int64_t>(1, microbatches / degree);
  if (looped && microbatches % rounds != 0)
    fail("pipeline schedule {}: {} microbatches do not split into {} equal rounds (the "
         "microbatches over the {} pipeline ranks, rounded down)",
         name, microbatches, rounds, degree);

  PipelineSchedule schedule;
  schedule.kind = kind;
  schedule.degree = degree;
  schedule.stagesPerRank = stagesPerRank;
  schedule.microbatches = microbatches;
  for (int64_t rank = 0; rank < degree; ++rank) {
    ComputeOrder order;
    switch (kind) {
    case PipelineScheduleKind::GPipe:
      order = gpipeOrder(rank, microbatches);
      break;
    case PipelineScheduleKind::OneFOneB:
      order = oneFOneBOrder(rank, degree, microbatches);
      break;
    case PipelineScheduleKind::Interleaved1F1B:
      order = interleavedOrder(rank, degree, stagesPerRank, microbatches, microbatches / rounds);
      break;
    }
    schedule.ranks.push_back(withTransfers(order, schedule.numStages()));
  }
  return schedule;
}

namespace {

/// A transfer in flight: (is a gradient, receiving stage, microbatch).
using MessageKey = std::tuple<bool, int64_t, int64_t>;

MessageKey messageOf(const PipelineAction &a) {
  bool gradient = a.kind == Kind::SendGradient || a.kind == Kind::RecvGradient;
  bool send = a.kind == Kind::SendActivation || a.kind == Kind::SendGradient;
  return {gradient, send ? a.peerStage() : a.stage, a.microbatch};
}

/// Every stage forwards and backwards every microbatch once, on its rank,
/// the forward first.
void checkComputeOrder(const PipelineSchedule &s) {
  std::map<std::pair<int64_t, int64_t>, int> state; // (stage, mb) -> 0, 1 fwd, 2 bwd
  for (int64_t rank = 0; rank < s.degree; ++rank) {
    for (const PipelineAction &a : s.ranks[rank]) {
      if (a.stage < 0 || a.stage >= s.numStages() || s.rankOf(a.stage) != rank ||
          a.microbatch < 0 || a.microbatch >= s.microbatches)
        fail("pipeline schedule: rank {} runs {}, which is not one of its stages' {} "
             "microbatches",
             rank, a.str(), s.microbatches);
      if (!a.isCompute())
        continue;
      int &done = state[{a.stage, a.microbatch}];
      bool forward = a.kind == Kind::Forward;
      if (done != (forward ? 0 : 1))
        fail("pipeline schedule: rank {} runs {} {}", rank, a.str(),
             forward ? "twice" : "before its forward, or twice");
      done = forward ? 1 : 2;
    }
  }
  for (int64_t stage = 0; stage < s.numStages(); ++stage)
    for (int64_t m = 0; m < s.microbatches; ++m)
      if (state[{stage, m}] != 2)
        fail("pipeline schedule: stage {} never runs the {} of microbatch {}", stage,
             state[{stage, m}] == 0 ? "forward" : "backward", m);
}

} // namespace

std::vector<int64_t> peakHeldBytes(const PipelineSchedule &s,
                                   const std::vector<int64_t> &bytesPerStage) {
  std::vector<int64_t> peak(s.degree, 0);
  for (int64_t rank = 0; rank < s.degree; ++rank) {
    int64_t held = 0;
    for (const PipelineAction &a : s.ranks[rank]) {
      if (a.kind == Kind::Forward)
        peak[rank] = std::max(peak[rank], held += bytesPerStage.at(a.stage));
      else if (a.kind == Kind::Backward)
        held -= bytesPerStage.at(a.stage);
    }
  }
  return peak;
}

PipelineTimeline simulate(const PipelineSchedule &s, double forwardTime, double backwardTime,
                          double transferTime) {
  return simulate(s, std::vector<double>(s.numStages(), forwardTime),
                  std::vector<double>(s.numStages(), backwardTime), transferTime);
}

PipelineTimeline simulate(const PipelineSchedule &s, const std::vector<double> &forwardTimes,
                          const std::vector<double> &backwardTimes, double transferTime) {
  if (int64_t(forwardTimes.size()) != s.numStages() ||
      int64_t(backwardTimes.size()) != s.numStages())
    fail("pipeline schedule: {} forward and {} backward times for {} stages", forwardTimes.size(),
         backwardTimes.size(), s.numStages());
  PipelineTimeline timeline;
  checkComputeOrder(s);
  // Microbatches in flight are the bytes held when each keeps one.
  timeline.peakInFlight = peakHeldBytes(s, std::vector<int64_t>(s.numStages(), 1));
  timeline.ranks.resize(s.degree);
  std::map<MessageKey, double> arrived; // sent, not yet received: when it arrives
  std::vector<size_t> next(s.degree, 0);
  std::vector<double> clock(s.degree, 0);
  double busy = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t rank = 0; rank < s.degree; ++rank) {
      for (; next[rank] < s.ranks[rank].size(); ++next[rank], progress = true) {
        const PipelineAction &a = s.ranks[rank][next[rank]];
        double start = clock[rank];
        if (a.isCompute()) {
          double time = (a.kind == Kind::Forward ? forwardTimes : backwardTimes)[a.stage];
          clock[rank] += time;
          busy += time;
        } else if (a.kind == Kind::SendActivation || a.kind == Kind::SendGradient) {
          if (!arrived.emplace(messageOf(a), start + transferTime).second)
            fail("pipeline schedule: rank {} sends {} twice", rank, a.str());
        } else {
          auto message = arrived.find(messageOf(a));
          if (message == arrived.end())
            break; // waits for the sender
          clock[rank] = start = std::max(start, message->second);
          arrived.erase(message);
        }
        timeline.ranks[rank].push_back({a, start, clock[rank]});
      }
    }
  }
  std::string stuck;
  for (int64_t rank = 0; rank < s.degree; ++rank)
    if (next[rank] < s.ranks[rank].size())
      stuck += fmt::format("{}rank {} at {}", stuck.empty() ? "" : ", ", rank,
                           s.ranks[rank][next[rank]].str());
  if (!stuck.empty())
    fail("pipeline schedule {} deadlocks: {} wait{} for a send that never comes", wordOf(s.kind),
         stuck, stuck.find(',') == std::string::npos ? "s" : "");
  if (!arrived.empty())
    fail("pipeline schedule: a transfer to stage {} of microbatch {} is never received",
         std::get<1>(arrived.begin()->first), std::get<2>(arrived.begin()->first));
  timeline.makespan = *std::max_element(clock.begin(), clock.end());
  if (timeline.makespan > 0)
    timeline.bubbleFraction = 1 - busy / (timeline.makespan * s.degree);
  return timeline;
}

} // namespace kiln
