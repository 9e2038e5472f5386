//===- StepSchedule.h - Predicted timeline of a per-rank step ----*- C++ -*-===//
//
// Times every op of a per-rank program on a target and lays them on two
// streams, as a runtime overlaps communication with compute:
//
//   * a compute op takes the roofline time max(FLOPs / achieved peak of its
//     class, bytes / achieved memory bandwidth) plus the profile's per-op
//     overhead (CostOpInterface FLOPs and bytes, bytes at the target's
//     precision); on a target that times GEMMs by shape (the cpu target), an
//     op that reports its GEMMs takes their measured seconds instead; compute
//     ops run one after another in program order;
//   * a collective takes its alpha-beta ring time (Collective.h) on the one
//     communication stream, which takes collectives in the order they become
//     ready (program order among equals);
//   * an op starts once its operands are ready; an all-gather of a parameter
//     shard (FSDP) may start no earlier than the first compute op of the
//     module before its consumer's (FSDP2 prefetches one module ahead).
//
// A target without overlap_communication (Kiln's CPU ranks) runs each
// collective inline, in program order, on the one stream.
//
// The step's time is the critical path: when the last op ends.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PLANNER_STEPSCHEDULE_H
#define KILN_PLANNER_STEPSCHEDULE_H

#include "kiln/Planner/Collective.h"
#include "kiln/Planner/TargetProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

class ValuePrecision;

/// "matmul", "attention" or "vector" (an op's class: CostOpInterface).
const char *opClassName(OpClass opClass);

struct ScheduledOp {
  enum class Stream { Compute, Communication } stream = Stream::Compute;
  std::string name; ///< the op's name: "kiln.linear", "shard.all_gather"
  std::string fqn;  ///< its module (a collective: its consumer's or producer's)
  mlir::Operation *op = nullptr; ///< the op in the planned program
  double start = 0, seconds = 0;
  double flops = 0;  ///< compute: FLOPs (CostOpInterface: a double)
  int64_t bytes = 0; ///< compute: bytes read + written
  OpClass opClass = OpClass::Vector;
  bool memoryBound = false;
  /// Timed as the GEMMs it issues, measured at their shapes (the cpu target).
  bool gemmsTimed = false;
  /// A linear's GEMM run in float8 (the run's Float8 linears), its
  /// operands' casts included.
  bool float8 = false;
  std::optional<Collective> collective;
  /// A collective's algorithm: the faster of a flat ring and two levels.
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
};

struct StepSchedule {
  std::vector<ScheduledOp> ops; ///< ops that take time, in program order
  double seconds = 0;           ///< the critical path
  double computeSeconds = 0;    ///< busy time of the compute stream
  double communicationSeconds = 0; ///< busy time of the communication stream
  double flops = 0;
  /// The part of the compute that recomputes checkpointed activations (ops
  /// tagged kiln.recomputed).
  double recomputeSeconds = 0;
  double recomputeFlops = 0;
  /// The GEMMs run in float8 (the run's Float8 linears): their count, FLOPs
  /// and seconds (their operands' casts included).
  int64_t float8Gemms = 0;
  double float8Flops = 0, float8Seconds = 0;
};

/// Schedules the body of `fn` (a per-rank program) on `target`, tensors sized
/// by `precision`.
StepSchedule scheduleStep(mlir::func::FuncOp fn, const TargetProfile &target,
                          const ValuePrecision &precision);

/// Roofline seconds of `flops` and `bytes` for an op of class `opClass`.
double rooflineSeconds(double flops, int64_t bytes, OpClass opClass,
                       const TargetProfile &target, bool *memoryBound = nullptr);

} // namespace kiln

#endif // KILN_PLANNER_STEPSCHEDULE_H
