//===- ChromeTrace.cpp - The predicted step as a Chrome trace -------------===//
//
// Chrome's trace event format (JSON, "X" complete events in microseconds),
// which chrome://tracing and ui.perfetto.dev open: one process for the rank
// class, a thread per stream.
//
//===----------------------------------------------------------------------===//

#include "kiln/Planner/StepPlan.h"
#include "kiln/Support/Json.h"

#include <fmt/format.h>

namespace kiln {

namespace {

using nlohmann::json;

/// A pipelined step: a process per pipeline rank, its stages' forwards and
/// backwards of every schedule run, then its update, on a compute thread;
/// its sends on a communication thread.
json pipelineEvents(const StepPlan &plan) {
  const PipelineFigures &p = *plan.pipeline;
  json events = json::array();
  for (int64_t rank = 0; rank < p.degree; ++rank) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"args", {{"name", fmt::format("pp rank {}", rank)}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", 0},
                      {"args", {{"name", "compute"}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", 1},
                      {"args", {{"name", "sends"}}}});
    for (int64_t run = 0; run < p.scheduleRuns; ++run) {
      double offset = double(run) * p.makespanSeconds;
      for (const TimedAction &t : p.timeline.ranks[rank]) {
        bool send = t.action.kind == PipelineActionKind::SendActivation ||
                    t.action.kind == PipelineActionKind::SendGradient;
        if (!t.action.isCompute() && !send)
          continue;
        events.push_back({{"name", t.action.str()},
                          {"cat", send ? "communication" : "compute"},
                          {"ph", "X"},
                          {"pid", rank},
                          {"tid", send ? 1 : 0},
                          {"ts", (offset + t.start) * 1e6},
                          {"dur", (send ? p.transferSeconds : t.end - t.start) * 1e6},
                          {"args",
                           {{"stage", t.action.stage},
                            {"microbatch", t.action.microbatch},
                            {"schedule_run", run}}}});
      }
    }
    events.push_back({{"name", "update"},
                      {"cat", "compute"},
                      {"ph", "X"},
                      {"pid", rank},
                      {"tid", 0},
                      {"ts", double(p.scheduleRuns) * p.makespanSeconds * 1e6},
                      {"dur", p.updateSeconds[rank] * 1e6}});
  }
  return events;
}

} // namespace

void writeChromeTrace(const StepPlan &plan, const std::string &path) {
  if (plan.pipeline) {
    json trace = {{"traceEvents", pipelineEvents(plan)}, {"displayTimeUnit", "ms"}};
    writeFileAtomic(path, trace.dump() + "\n");
    return;
  }
  json events = json::array();
  std::string process = fmt::format("{} ranks of {} x{} (one rank class)", plan.worldSize,
                                    plan.target.name, plan.setting.nodes);
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0},
                    {"args", {{"name", process}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0},
                    {"args", {{"name", "compute"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 1},
                    {"args", {{"name", "communication"}}}});
  for (const ScheduledOp &op : plan.schedule.ops) {
    json args = {{"fqn", op.fqn}};
    std::string name = op.name;
    if (op.collective) {
      name = std::string(collectiveKindName(op.collective->kind)) + " " + op.collective->axes;
      args["bytes_sent"] = op.collective->bytesSent;
      args["message_bytes"] = op.collective->messageBytes;
      args["ranks"] = op.collective->groupSize;
    } else {
      args["flops"] = flopsJson(op.flops);
      args["bytes"] = op.bytes;
      args["class"] = opClassName(op.opClass);
      args["bound"] = op.memoryBound ? "memory" : "compute";
    }
    events.push_back({{"name", name},
                      {"cat", op.collective ? "communication" : "compute"},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", op.collective ? 1 : 0},
                      {"ts", op.start * 1e6},
                      {"dur", op.seconds * 1e6},
                      {"args", args}});
  }
  json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  writeFileAtomic(path, trace.dump() + "\n");
}

} // namespace kiln
