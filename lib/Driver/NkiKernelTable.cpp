//===- NkiKernelTable.cpp - kernels.json: what the binder traces ----------===//

#include "kiln/Driver/NkiKernelTable.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <map>
#include <set>

using json = nlohmann::json;

namespace kiln {
namespace {

json tensorOf(const xla::ShapeProto &shape) {
  return {{"shape", std::vector<int64_t>(shape.dimensions().begin(), shape.dimensions().end())},
          {"dtype", manifestDtype(shape.element_type())}};
}

/// The result shapes of a custom call: the tuple's elements, or its one.
std::vector<xla::ShapeProto> resultShapes(const xla::HloInstructionProto &call) {
  if (call.shape().element_type() != xla::TUPLE)
    return {call.shape()};
  return {call.shape().tuple_shapes().begin(), call.shape().tuple_shapes().end()};
}

} // namespace

json nkiKernelTable(const xla::HloModuleProto &module, TargetName target, int64_t lnc) {
  json calls = json::array();
  std::set<std::string> traces; // distinct (function, shapes, keywords)
  for (const xla::HloComputationProto &computation : module.computations()) {
    std::map<int64_t, const xla::HloInstructionProto *> byId;
    for (const xla::HloInstructionProto &inst : computation.instructions())
      byId[inst.id()] = &inst;
    for (const xla::HloInstructionProto &inst : computation.instructions()) {
      if (inst.opcode() != hlo::CustomCallOp::getOpcode())
        continue;
      std::string where = "custom call " + inst.name();
      json config = parseJson(inst.backend_config(), where + " backend_config");
      std::vector<xla::ShapeProto> results = resultShapes(inst);
      std::map<int64_t, int64_t> aliasOf; // result -> operand
      for (const xla::OutputOperandAliasing &a : inst.output_operand_aliasing())
        aliasOf[a.output_shape_index().empty() ? 0 : a.output_shape_index(0)] = a.operand_index();
      json entry = {{"instruction", inst.name()},
                    {"computation", computation.name()},
                    {"custom_call_target", inst.custom_call_target()},
                    {"kiln_kernel", config.value("kiln_kernel", "")},
                    {"direction", config.value("kiln_direction", "")},
                    {"rule", config.value("rule", "")},
                    {"fqn", config.value("fqn", "")}};
      json resultList = json::array();
      for (size_t r = 0; r < results.size(); ++r) {
        json t = tensorOf(results[r]);
        if (aliasOf.count(int64_t(r)))
          t["aliases_operand"] = aliasOf[int64_t(r)];
        resultList.push_back(t);
      }
      entry["results"] = resultList;
      if (!config.contains("nki")) {
        entry["binding"] = nullptr;
        entry["unbound"] = fmt::format(
            "kernel '{}' ({}) is not bound to an NKI Library function yet: its call keeps "
            "Kiln's operands and JSON, which neuronx-cc cannot compile",
            config.value("kiln_kernel", ""), config.value("kernel", ""));
        calls.push_back(entry);
        continue;
      }
      const json &nki = config["nki"];
      if (!nki.contains("arguments") || !nki["arguments"].is_array() ||
          nki["arguments"].size() > size_t(inst.operand_ids_size()))
        fail("{}: its backend_config's nki.arguments do not match its {} operands", where,
             inst.operand_ids_size());
      json binding = {{"module", nki.value("module", "")},
                      {"function", nki.value("function", "")},
                      {"keywords", nki.value("keywords", json::object())},
                      {"source", nki.value("source", "")}};
      json arguments = json::array();
      std::string trace = binding["module"].get<std::string>() + "." +
                          binding["function"].get<std::string>() + binding["keywords"].dump();
      for (size_t i = 0; i < nki["arguments"].size(); ++i) {
        auto it = byId.find(inst.operand_ids(int(i)));
        if (it == byId.end())
          fail("{}: operand {} is no instruction of {}", where, i, computation.name());
        json argument = nki["arguments"][i];
        argument["operand"] = i;
        argument.update(tensorOf(it->second->shape()));
        trace += argument.dump();
        arguments.push_back(argument);
      }
      binding["arguments"] = arguments;
      entry["binding"] = binding;
      traces.insert(trace);
      calls.push_back(entry);
    }
  }
  return {{"format", "kiln-nki-kernels/1"},
          {"target", wordOf(target)},
          {"lnc", lnc},
          {"distinct_traces", traces.size()},
          {"calls", calls}};
}

} // namespace kiln
