//===- HloStats.cpp - What an emitted HLO module holds --------------------===//

#include "kiln/Backend/Neuron/HloStats.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"

#include <algorithm>

namespace kiln::neuron {
namespace {

int64_t bytesOf(const xla::ShapeProto &shape) {
  int64_t n = 1;
  for (int64_t d : shape.dimensions())
    n *= d;
  switch (shape.element_type()) {
  case xla::PRED:
  case xla::S8:
  case xla::U8:
    return n;
  case xla::F16:
  case xla::BF16:
  case xla::S16:
  case xla::U16:
    return 2 * n;
  case xla::S64:
  case xla::U64:
  case xla::F64:
    return 8 * n;
  default:
    return 4 * n;
  }
}

std::string groupsText(const xla::HloInstructionProto &inst) {
  std::string text = "{";
  for (int g = 0; g < inst.replica_groups_size(); ++g) {
    text += g ? ",{" : "{";
    const auto &ids = inst.replica_groups(g).replica_ids();
    for (int i = 0; i < ids.size(); ++i)
      text += (i ? "," : "") + std::to_string(ids[i]);
    text += "}";
  }
  return text + "}";
}

} // namespace

HloStats HloStats::of(const xla::HloModuleProto &module) {
  HloStats stats;
  std::map<int64_t, const xla::HloInstructionProto *> byId;
  for (const auto &comp : module.computations())
    for (const auto &inst : comp.instructions())
      byId[inst.id()] = &inst;
  for (const auto &comp : module.computations()) {
    if (comp.id() != module.entry_computation_id())
      continue;
    for (const auto &inst : comp.instructions()) {
      ++stats.instructions;
      ++stats.byOpcode[inst.opcode()];
      stats.customCalls += inst.opcode() == hlo::CustomCallOp::getOpcode();
      if (inst.replica_groups_size() == 0)
        continue;
      int64_t n = inst.replica_groups(0).replica_ids_size();
      // all-gather: the gathered result; the others: the operand.
      int64_t bytes = inst.opcode() == hlo::AllGatherOp::getOpcode()
                          ? bytesOf(inst.shape())
                          : bytesOf(byId.at(inst.operand_ids(0))->shape());
      int64_t sent = bytes * (n - 1) / n * (inst.opcode() == hlo::AllReduceOp::getOpcode() ? 2 : 1);
      std::string groups = groupsText(inst);
      Collective &c = stats.collectives[inst.opcode() + " " + groups];
      ++c.ops;
      c.bytesSent += sent;
      c.groups = inst.replica_groups_size();
      c.groupSize = n;
      if (std::find(stats.replicaGroupLists.begin(), stats.replicaGroupLists.end(), groups) ==
          stats.replicaGroupLists.end())
        stats.replicaGroupLists.push_back(groups);
    }
  }
  return stats;
}

} // namespace kiln::neuron
