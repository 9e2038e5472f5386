//===- NeuronConformance.cpp - What neuronx-cc's proven emitters write ----===//

#include "kiln/Backend/Neuron/NeuronConformance.h"
#include "kiln/Backend/Neuron/HloStats.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace kiln::neuron {

const std::vector<ConformanceRule> &conformanceRules() {
  static const std::vector<ConformanceRule> rules = {
      {"rank-parameter", "the rank is an s32[] or u32[] entry parameter named 'rank'; no "
                         "replica-id or partition-id instruction"},
      {"collective-ids", "collectives are cross-replica: explicit replica groups of global ranks "
                         "that cover every rank once, no channel_id, no use_global_device_ids; "
                         "all-to-all in its array form"},
      {"integer-scatter", "no scatter that reduces integer or boolean data (NCC_EVRF016)"},
      {"must-alias", "every input_output_alias entry is must-alias"},
      {"neff-names", "every entry parameter has neff_input_names and the root tuple "
                     "neff_output_names, one distinct name per tensor"},
      {"no-int64", "no s64 or u64 value anywhere in the module"},
      {"communicators", "at most the runtime's communicators (distinct replica-group lists) "
                        "per NEFF"},
  };
  return rules;
}

namespace {

/// Collects violations, at most kShown per rule.
class Report {
public:
  void add(const std::string &rule, std::string message) {
    if (++counts[rule] <= kShown)
      violations.push_back({rule, std::move(message)});
  }
  std::vector<ConformanceViolation> take() {
    std::vector<ConformanceViolation> ordered;
    for (const ConformanceRule &r : conformanceRules()) {
      for (ConformanceViolation &v : violations)
        if (v.rule == r.name)
          ordered.push_back(std::move(v));
      if (int64_t more = counts[r.name] - kShown; more > 0)
        ordered.push_back({r.name, fmt::format("... and {} more", more)});
    }
    return ordered;
  }

private:
  static constexpr int64_t kShown = 5;
  std::vector<ConformanceViolation> violations;
  std::map<std::string, int64_t> counts;
};

std::string where(const xla::HloInstructionProto &inst) {
  return inst.metadata().op_name().empty()
             ? inst.name()
             : fmt::format("{} ({})", inst.name(), inst.metadata().op_name());
}

const char *typeName(xla::PrimitiveType t) { return t == xla::S64 ? "s64" : "u64"; }

/// Whether `shape` (or a tuple element) holds s64 or u64 values.
bool has64BitIntegers(const xla::ShapeProto &shape, xla::PrimitiveType &found) {
  if (shape.element_type() == xla::S64 || shape.element_type() == xla::U64) {
    found = shape.element_type();
    return true;
  }
  for (const auto &t : shape.tuple_shapes())
    if (has64BitIntegers(t, found))
      return true;
  return false;
}

bool isCollective(const std::string &op) {
  return op == hlo::AllReduceOp::getOpcode() || op == hlo::AllGatherOp::getOpcode() ||
         op == hlo::ReduceScatterOp::getOpcode() || op == hlo::AllToAllOp::getOpcode() ||
         op == "collective-permute" || op == "all-reduce-start" || op == "all-gather-start" ||
         op == "collective-broadcast";
}

const xla::HloComputationProto *entryOf(const xla::HloModuleProto &module) {
  for (const auto &comp : module.computations())
    if (comp.id() == module.entry_computation_id())
      return &comp;
  return nullptr;
}

const xla::HloInstructionProto *rootOf(const xla::HloComputationProto &comp) {
  for (const auto &inst : comp.instructions())
    if (inst.id() == comp.root_id())
      return &inst;
  return nullptr;
}

std::string attribute(const xla::HloInstructionProto &inst, const char *key) {
  auto it = inst.frontend_attributes().map().find(key);
  return it == inst.frontend_attributes().map().end() ? "" : it->second;
}

void checkRank(const xla::HloModuleProto &module, const xla::HloComputationProto &entry,
               Report &report) {
  int64_t ranks = 0;
  for (const auto &inst : entry.instructions()) {
    if (inst.opcode() != "parameter" || attribute(inst, kNeffInputNames) != "rank")
      continue;
    ++ranks;
    const auto &shape = inst.shape();
    if ((shape.element_type() != xla::S32 && shape.element_type() != xla::U32) ||
        shape.dimensions_size() != 0)
      report.add("rank-parameter",
                 fmt::format("parameter {} ('rank') must be an s32[] or u32[] scalar",
                             inst.parameter_number()));
  }
  if (ranks != 1)
    report.add("rank-parameter",
               fmt::format("expected one entry parameter named 'rank', found {}", ranks));
  for (const auto &comp : module.computations())
    for (const auto &inst : comp.instructions())
      if (inst.opcode() == hlo::ReplicaIdOp::getOpcode() || inst.opcode() == "partition-id")
        report.add("rank-parameter",
                   fmt::format("{} is a {} instruction: pass the rank as a parameter (NxD: "
                               "ReplicaID is not supported)",
                               where(inst), inst.opcode()));
}

void checkCollective(const xla::HloInstructionProto &inst, int64_t worldSize, Report &report) {
  const char *rule = "collective-ids";
  if (inst.channel_id() > 0)
    report.add(rule, fmt::format("{} has channel_id={}: cross-replica collectives take none",
                                 where(inst), inst.channel_id()));
  if (inst.use_global_device_ids())
    report.add(rule, fmt::format("{} has use_global_device_ids (flattened ids)", where(inst)));
  if (inst.replica_groups_size() == 0) {
    report.add(rule, fmt::format("{} has no explicit replica groups", where(inst)));
    return;
  }
  std::vector<bool> seen(size_t(worldSize), false);
  int64_t covered = 0, size = inst.replica_groups(0).replica_ids_size();
  for (const auto &group : inst.replica_groups()) {
    if (group.replica_ids_size() != size) {
      report.add(rule, fmt::format("{} has replica groups of different sizes", where(inst)));
      return;
    }
    for (int64_t id : group.replica_ids())
      if (id < 0 || id >= worldSize || seen[size_t(id)]) {
        report.add(rule, fmt::format("{} lists replica {} out of range [0, {}) or twice",
                                     where(inst), id, worldSize));
        return;
      } else {
        seen[size_t(id)] = true;
        ++covered;
      }
  }
  if (covered != worldSize)
    report.add(rule, fmt::format("{} groups cover {} of the {} ranks", where(inst), covered,
                                 worldSize));
  if (inst.opcode() == hlo::AllToAllOp::getOpcode()) {
    bool tupled = inst.shape().element_type() == xla::TUPLE;
    if (tupled || inst.operand_ids_size() != 1 || inst.dimensions_size() != 1)
      report.add(rule, fmt::format("{} is not the array form (one operand, dimensions={{split}})",
                                   where(inst)));
  }
}

void checkScatter(const xla::HloInstructionProto &inst,
                  const std::map<int64_t, const xla::HloComputationProto *> &computations,
                  Report &report) {
  xla::PrimitiveType t = inst.shape().element_type();
  bool integer = t == xla::PRED || t == xla::S8 || t == xla::S16 || t == xla::S32 ||
                 t == xla::S64 || t == xla::U8 || t == xla::U16 || t == xla::U32 ||
                 t == xla::U64;
  if (!integer || inst.called_computation_ids_size() == 0)
    return;
  auto it = computations.find(inst.called_computation_ids(0));
  // An assign combiner returns its second parameter: no reduction.
  const xla::HloInstructionProto *root = it == computations.end() ? nullptr : rootOf(*it->second);
  if (root && root->opcode() == "parameter")
    return;
  report.add("integer-scatter",
             fmt::format("{} reduces integer data with '{}' (NCC_EVRF016): scatter in float and "
                         "convert, or assign where each row is written once",
                         where(inst), root ? root->opcode() : "?"));
}

} // namespace

std::string describeViolations(const std::vector<ConformanceViolation> &violations) {
  std::string text;
  for (const ConformanceViolation &v : violations)
    text += fmt::format("{}  {}: {}", text.empty() ? "" : "\n", v.rule, v.message);
  return text;
}

std::vector<std::string> neffInputNames(const xla::HloModuleProto &module) {
  std::vector<std::string> names;
  const xla::HloComputationProto *entry = entryOf(module);
  if (!entry)
    return names;
  for (const auto &inst : entry->instructions())
    if (inst.opcode() == "parameter") {
      if (int64_t(names.size()) <= inst.parameter_number())
        names.resize(size_t(inst.parameter_number() + 1));
      names[size_t(inst.parameter_number())] = attribute(inst, kNeffInputNames);
    }
  return names;
}

std::vector<std::string> neffOutputNames(const xla::HloModuleProto &module) {
  const xla::HloComputationProto *entry = entryOf(module);
  const xla::HloInstructionProto *root = entry ? rootOf(*entry) : nullptr;
  if (!root)
    return {};
  std::string names = attribute(*root, kNeffOutputNames);
  if (names.empty())
    return {};
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(names).split(parts, ',');
  return {parts.begin(), parts.end()};
}

std::vector<ConformanceViolation> checkConformance(const xla::HloModuleProto &module,
                                                   int64_t worldSize, int64_t maxCommunicators) {
  Report report;
  const xla::HloComputationProto *entry = entryOf(module);
  if (!entry) {
    report.add("rank-parameter", "the module has no entry computation");
    return report.take();
  }
  std::map<int64_t, const xla::HloComputationProto *> computations;
  for (const auto &comp : module.computations())
    computations[comp.id()] = &comp;

  checkRank(module, *entry, report);
  for (const auto &comp : module.computations())
    for (const auto &inst : comp.instructions()) {
      if (isCollective(inst.opcode()))
        checkCollective(inst, worldSize, report);
      if (inst.opcode() == hlo::ScatterOp::getOpcode())
        checkScatter(inst, computations, report);
    }

  for (const auto &e : module.input_output_alias().entries())
    if (e.kind() != xla::MUST_ALIAS)
      report.add("must-alias",
                 fmt::format("output {{{}}} aliases parameter {} as {}",
                             e.output_shape_index_size() ? e.output_shape_index(0) : -1,
                             e.parameter_number(),
                             e.kind() == xla::MAY_ALIAS ? "may-alias" : "an undefined kind"));

  std::vector<std::string> inputs = neffInputNames(module);
  std::set<std::string> seenInputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].empty())
      report.add("neff-names", fmt::format("parameter {} has no neff_input_names", i));
    else if (!seenInputs.insert(inputs[i]).second)
      report.add("neff-names", fmt::format("parameter {}'s name '{}' repeats", i, inputs[i]));
  const xla::HloInstructionProto *root = rootOf(*entry);
  std::vector<std::string> outputs = neffOutputNames(module);
  int64_t results = root && root->shape().element_type() == xla::TUPLE
                        ? root->shape().tuple_shapes_size()
                        : 1;
  if (int64_t(outputs.size()) != results) {
    report.add("neff-names", fmt::format("the root has {} results but neff_output_names lists {}",
                                         results, outputs.size()));
  } else {
    std::set<std::string> seenOutputs;
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i].empty() || !seenOutputs.insert(outputs[i]).second)
        report.add("neff-names",
                   fmt::format("output {}'s name '{}' is empty or repeats", i, outputs[i]));
  }

  for (const auto &comp : module.computations())
    for (const auto &inst : comp.instructions()) {
      xla::PrimitiveType found = xla::PRIMITIVE_TYPE_INVALID;
      if (has64BitIntegers(inst.shape(), found))
        report.add("no-int64", fmt::format("{} is {}", where(inst), typeName(found)));
    }

  HloStats stats = HloStats::of(module);
  if (int64_t(stats.replicaGroupLists.size()) > maxCommunicators)
    report.add("communicators",
               fmt::format("{} distinct replica-group lists, over the runtime's {} per NEFF "
                           "(target.neuron_max_communicators)",
                           stats.replicaGroupLists.size(), maxCommunicators));
  return report.take();
}

} // namespace kiln::neuron
