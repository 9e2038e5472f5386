//===- TargetProfile.h - A machine the planner plans for --------*- C++ -*-===//
//
// What the planner knows of a target: ranks per node, per-rank peak rates,
// memory and bandwidth, the interconnect inside and between nodes, the
// precision training runs at, efficiency factors and the hourly price. The
// profiles ship as JSON under targets/ (compiled into the binary, so
// `--target trn2.48xlarge` works from anywhere); a user passes their own file.
// Every figure's public source is listed in the file's "sources" object.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PLANNER_TARGETPROFILE_H
#define KILN_PLANNER_TARGETPROFILE_H

#include "kiln/Dialect/Kiln/IR/GemmShape.h"
#include "kiln/Dialect/Kiln/IR/OpClass.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// Bytes per element of each class of values, as torchtitan's FSDP2 mixed
/// precision keeps them (docs/planner.md).
struct PrecisionPolicy {
  int64_t computeBytes = 4;   ///< activations and gathered parameters
  int64_t masterBytes = 4;    ///< sharded parameters (the master weights)
  int64_t reduceBytes = 4;    ///< gradients and their reductions
  int64_t optimizerBytes = 4; ///< AdamW moments
  /// The run's Float8 linears (torchtitan's float8 converter; set by the
  /// planner from model.converters, not by a profile).
  struct Float8Linears {
    bool enabled = false;
    /// rowwise_with_gw_hp: the weight gradient's GEMM stays high precision.
    bool weightGradientHighPrecision = false;
    /// Linears whose fqn contains one of these stay high precision.
    std::vector<std::string> filterFqns;
  } float8;
};

/// Ring bandwidth (bytes/s each rank moves) and per-step latency of a link.
struct Link {
  std::string name;
  double bandwidth = 0;
  double latencySeconds = 0;
};

struct TargetProfile {
  std::string name, description;
  std::string source; ///< the file or "built-in"
  int64_t ranksPerNode = 1;
  int64_t ranksPerDevice = 1;
  double pricePerHourUsd = 0;
  PrecisionPolicy precision;
  double matmulPeakFlops = 0; ///< per rank, at the compute precision
  /// Per rank, a GEMM with float8 operands ("peak_flops_per_rank.
  /// matmul_float8", optional): 0 where the target has no Float8 rate.
  double float8PeakFlops = 0;
  double vectorPeakFlops = 0;
  int64_t memoryBytes = 0; ///< per rank
  double memoryBandwidth = 0;
  int64_t runtimeReserveBytes = 0;
  /// What the device's memory allocator holds beyond the live peak, as a
  /// share of it ("allocator_overhead", optional: 0): a GPU's caching
  /// allocator keeps freed blocks and splits them, and its reserved peak is
  /// what decides an out-of-memory and what torchtitan reports.
  double allocatorOverhead = 0;
  Link intraNode, interNode;
  /// Collectives run on their own stream beside compute (accelerators), or
  /// inline between compute ops (Kiln's CPU ranks block in each collective).
  bool overlapCommunication = true;
  struct Efficiency {
    double matmul = 1, attention = 1, vector = 1, memory = 1, collective = 1;
    double opOverheadSeconds = 0;
  } efficiency;
  /// Seconds of one GEMM of a shape on the machine at hand for one of
  /// `ranksOnMachine` ranks sharing its cores ("gemm_seconds": "measured",
  /// the cpu target; the planner passes ranksPerNode): an op that reports
  /// its GEMMs (CostOpInterface::getGemms) takes their time instead of its
  /// FLOPs at efficiency.matmul. Empty for every other target.
  std::function<double(const GemmShape &, int64_t ranksOnMachine)> gemmSeconds;
  std::map<std::string, std::string> sources; ///< field path -> where the figure comes from

  /// Achieved FLOP/s of an op class: peak x efficiency.
  double achievedFlops(OpClass opClass) const;
  double achievedMemoryBandwidth() const { return memoryBandwidth * efficiency.memory; }
};

/// This machine's rates for the fields a profile marks "measured".
struct MachineProbe {
  std::function<double()> sgemmFlops;
  std::function<double()> memoryBandwidth;
  std::function<int64_t()> memoryBytes;
  /// Seconds of one GEMM of a shape for one of `ranksOnMachine` ranks
  /// sharing the machine's cores.
  std::function<double(const GemmShape &, int64_t ranksOnMachine)> gemmSeconds;
};

/// Names of the profiles under targets/, sorted.
std::vector<std::string> builtinTargetNames();

/// The built-in profile `nameOrPath`, else the JSON file at that path. Throws
/// kiln::Error naming the file and the field for anything malformed, and
/// listing the built-in names for an unknown one.
TargetProfile loadTargetProfile(const std::string &nameOrPath, const MachineProbe &probe);

/// The JSON text of the profile loadTargetProfile reads for `nameOrPath`,
/// and where it comes from (`source`: "targets/<name>.json" or the path).
std::string targetProfileText(const std::string &nameOrPath, std::string &source);

/// Parses profile JSON text; `source` names it in errors.
TargetProfile parseTargetProfile(const std::string &text, const std::string &source,
                                 const MachineProbe &probe);

} // namespace kiln

#endif // KILN_PLANNER_TARGETPROFILE_H
