//===- CompiledCollectives.h - A compiled step's collectives on the grid -*- C++ -*-===//
//
// The host side of kiln_collective (kiln/Passes/HloToLinalg/HostCalls.h):
// each collective site of an hlo step bound, before lowering, to the
// DeviceGrid axes its replica groups span, and run there on the buffers the
// compiled code passes: the same MPI collectives (and the same byte counts
// by axis) as eager training. See docs/compiled.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_COMPILED_COMPILEDCOLLECTIVES_H
#define KILN_BACKEND_COMPILED_COMPILEDCOLLECTIVES_H

#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Backend/Compiled/CompiledFunction.h"

#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace kiln {

/// One collective site (numberCollectiveSites order).
struct CompiledCollective {
  enum class Kind { AllGather, ReduceScatter, AllReduce, AllToAll, ReplicaId };
  Kind kind;
  /// The op and the kiln fqn it came from, for errors.
  std::string where;
  /// The gather, scatter or split dimension.
  int64_t dim = 0;
  Reduction reduction = Reduction::Sum;
  /// The grid axes whose groups are the op's replica groups.
  std::vector<int16_t> axes;
  /// The operand's (none for the replica id) and the result's.
  std::vector<TensorSignature> operands;
  TensorSignature result;
};

/// Numbers the collective sites of `hloStep` and binds each to `grid`'s axes.
/// Throws kiln::Error naming the op (and its kiln fqn) when its replica
/// groups are not the groups of any set of the grid's axes, its reduction
/// or element type is one the grid's collectives lack, or there is no grid
/// (nullptr: a step run alone, which only a replica id may ask about).
std::vector<CompiledCollective> bindCollectives(mlir::ModuleOp hloStep, const DeviceGrid *grid);

/// Runs `collective` on `grid` (nullptr: a world of one) with the aligned
/// data pointers of its operand buffer, then of its result buffer (dense,
/// row-major), in `table`.
void runCollective(const CompiledCollective &collective, DeviceGrid *grid, const int64_t *table);

} // namespace kiln

#endif // KILN_BACKEND_COMPILED_COMPILEDCOLLECTIVES_H
