//===- NeuronConformance.h - What neuronx-cc's proven emitters write -*- C++ -*-===//
//
// The conventions of the HLO that reaches neuronx-cc in working flows
// (NKIPy, NeuronX Distributed, torch-neuronx; docs/neuron.md lists each
// rule with its source), checked on a serialized module. XLA's own verifier
// accepts more than these; the rules are what Kiln's module must also keep
// to for a trn2 to compile and run it. `kiln compile` refuses a module that
// breaks one, and `kiln check-hlo --neuron DIR` runs them alone.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_NEURON_NEURONCONFORMANCE_H
#define KILN_BACKEND_NEURON_NEURONCONFORMANCE_H

#include "proto/hlo.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::neuron {

/// neuronx-cc's tensor names, as frontend_attributes: `neff_input_names` on
/// each entry parameter, `neff_output_names` (comma-separated) on the root
/// tuple. HloExport writes them; the neff-names rule checks them.
inline constexpr const char *kNeffInputNames = "neff_input_names";
inline constexpr const char *kNeffOutputNames = "neff_output_names";

struct ConformanceRule {
  const char *name;
  const char *summary;
};
/// Every rule, in the order they are checked and reported.
const std::vector<ConformanceRule> &conformanceRules();

struct ConformanceViolation {
  std::string rule;    ///< a conformanceRules() name
  std::string message; ///< what breaks it, naming the instruction
};

/// The violations of `module`, the per-rank program of `worldSize` ranks
/// for a runtime allowing `maxCommunicators` distinct replica-group lists
/// per NEFF, in rule order (empty: it conforms). At most a few per rule are
/// listed, then a count of the rest.
std::vector<ConformanceViolation> checkConformance(const xla::HloModuleProto &module,
                                                   int64_t worldSize, int64_t maxCommunicators);

/// One line per violation: "  <rule>: <message>".
std::string describeViolations(const std::vector<ConformanceViolation> &violations);

/// The entry parameters' neff_input_names (one per parameter, "" where
/// missing) and the root tuple's neff_output_names, split.
std::vector<std::string> neffInputNames(const xla::HloModuleProto &module);
std::vector<std::string> neffOutputNames(const xla::HloModuleProto &module);

} // namespace kiln::neuron

#endif // KILN_BACKEND_NEURON_NEURONCONFORMANCE_H
