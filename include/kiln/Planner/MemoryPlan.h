//===- MemoryPlan.h - Static live-memory plan of a kiln function -*- C++ -*-===//
//
// Sums the buffer sizes of a function's BufferLiveness events, from types
// alone. The CPU executor allocates, donates and frees by the same analysis,
// so with the arguments moved in (as the Trainer does) the peak predicted
// here is exactly what its ExecutionStats::peakLiveBytes measures.
//
// With a ValuePrecision the same events are sized at a target's precision
// (each buffer at the width of the value that creates it), and the peak is
// broken down by what its live buffers hold.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PLANNER_MEMORYPLAN_H
#define KILN_PLANNER_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <array>
#include <optional>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

class ValuePrecision;

/// What a buffer holds, from the value that creates it.
enum class MemoryCategory {
  Parameters,     ///< kiln.param arguments (and the updates that overwrite them)
  Gradients,      ///< gradients, reduced or in flight (gradientValues)
  OptimizerState, ///< kiln.state arguments
  Activations,    ///< forward results the backward reads (kiln.saved)
  Temporaries,    ///< every other intermediate value
  CollectiveBuffers, ///< results of shard collectives (gathered parameters, ...)
  Inputs,         ///< data arguments (token ids, labels)
};
inline constexpr size_t kNumMemoryCategories = 7;
/// "parameters", "gradients", "optimizer_state", "activations",
/// "temporaries", "collective_buffers", "inputs".
const char *memoryCategoryName(MemoryCategory category);

struct MemoryPlan {
  int64_t peakBytes = 0;        ///< all live buffers at the worst point
  int64_t argumentBytes = 0;    ///< every used argument (parameters, state, data)
  int64_t parameterBytes = 0;   ///< arguments tagged kiln.param
  int64_t stateBytes = 0;       ///< arguments tagged kiln.state (optimizer state)
  /// Gradients the function returns (kiln.grad results) or feeds to AdamW.
  int64_t gradientBytes = 0;
  /// Peak of bytes held by intermediate values (not arguments), e.g.
  /// activations saved for the backward plus gradients in flight.
  int64_t peakIntermediateBytes = 0;
  /// Bytes of the forward results the backward reads (tagged kiln.saved by
  /// kiln-autodiff), each buffer counted once: the activation memory (of
  /// one microbatch, when the step accumulates gradients).
  int64_t savedActivationBytes = 0;

  /// The live bytes at the first point the peak is reached, by category
  /// (summing to peakBytes).
  std::array<int64_t, kNumMemoryCategories> peakByCategory{};
  /// The op after whose results the peak is reached (null: before the first
  /// op, the arguments alone).
  mlir::Operation *peakOp = nullptr;
  /// The largest buffers live at the peak, largest first.
  struct Contributor {
    std::string what; ///< "<category> <fqn or argument role> <shape>"
    MemoryCategory category;
    int64_t bytes;
  };
  std::vector<Contributor> topContributors;
  /// The live bytes at the peak by module (moduleKeyOf each buffer's
  /// creator: "layers.N", "tok_embeddings", "output", ...), largest first.
  std::vector<std::pair<std::string, int64_t>> peakByModule;
};

/// A buffer as the plan names it: "<op> <fqn> [<shape>]" for an op's result,
/// "<argument name> [<shape>]" for an argument.
std::string describeBuffer(mlir::func::FuncOp fn, mlir::Value creator);

/// One acquisition of a buffer, in the order the plan replays them: the
/// value creating it (an argument or an op's result) and the live bytes
/// right after, by category.
struct MemoryEvent {
  mlir::Value creator;
  int64_t live = 0;
  std::array<int64_t, kNumMemoryCategories> byCategory{};
};

struct MemoryPlanOptions {
  /// The largest buffers to name at the peak.
  size_t contributors = 8;
  /// Describe the point after this many acquisitions (an index into the
  /// timeline, plus one) as the peak instead of the maximum: its bytes,
  /// categories, op and largest buffers (a plan scaled from reduced models
  /// names the point that is the whole model's peak).
  std::optional<int64_t> reportAfter;
  /// Filled with every acquisition, when given.
  std::vector<MemoryEvent> *timeline = nullptr;
};

/// Throws kiln::Error for a function without a single-block body. Buffers are
/// sized by their IR types, or at `precision` when given.
MemoryPlan planMemory(mlir::func::FuncOp fn, const ValuePrecision *precision = nullptr,
                      size_t contributors = 8);
MemoryPlan planMemory(mlir::func::FuncOp fn, const ValuePrecision *precision,
                      const MemoryPlanOptions &options);

} // namespace kiln

#endif // KILN_PLANNER_MEMORYPLAN_H
