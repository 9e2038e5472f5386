//===- HloStats.h - What an emitted HLO module holds -------------*- C++ -*-===//
//
// Figures `kiln compile` reports and writes to the manifest: instructions by
// opcode, collectives by kind and replica groups with the bytes one rank
// sends (ring algorithms: (n-1)/n of the gathered or reduced tensor, twice
// for an all-reduce; an all-to-all keeps 1/n of its operand and sends the
// rest), and the distinct replica-group lists (each a communicator, which
// the Neuron runtime limits per NEFF: target.neuron_max_communicators).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_NEURON_HLOSTATS_H
#define KILN_BACKEND_NEURON_HLOSTATS_H

#include "proto/hlo.pb.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::neuron {

struct HloStats {
  struct Collective {
    int64_t ops = 0;
    int64_t bytesSent = 0; ///< per rank, per step
    int64_t groups = 0, groupSize = 0;
  };
  int64_t instructions = 0; ///< in the entry computation
  std::map<std::string, int64_t> byOpcode;
  /// By "<opcode> <replica groups>", e.g. "all-gather {{0,2},{1,3}}".
  std::map<std::string, Collective> collectives;
  /// Distinct replica-group lists, as printed in HLO text.
  std::vector<std::string> replicaGroupLists;
  int64_t customCalls = 0;

  static HloStats of(const xla::HloModuleProto &module);
};

} // namespace kiln::neuron

#endif // KILN_BACKEND_NEURON_HLOSTATS_H
