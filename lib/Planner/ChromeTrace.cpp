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

void writeChromeTrace(const StepPlan &plan, const std::string &path) {
  using nlohmann::json;
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
