//===- BufferLiveness.h - Buffers, last uses and donations -------*- C++ -*-===//
//
// The one liveness analysis of a function body, shared by every consumer
// that needs to know when memory is taken and given back: the CPU executor
// frees and donates buffers by it, and the memory plan sums its buffer sizes.
// Because both follow the same events, the plan's peak equals the executor's
// measured peak by construction.
//
// Rules, in op order:
//   * a value is live from its definition (arguments: from the start) to its
//     last use; a value with no use never occupies memory;
//   * a view (ViewLikeOpInterface, e.g. kiln.reshape) shares its source's
//     buffer;
//   * a result tied to an operand (TiedOperandOpInterface) takes over that
//     operand's buffer when the operand dies at the op, appears there once,
//     and no other live value shares its buffer (a donation);
//   * every other result gets a new buffer; a buffer is released after the
//     op at which its last live value dies. The values a function returns
//     stay live (the caller receives them).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_ANALYSIS_BUFFERLIVENESS_H
#define KILN_ANALYSIS_BUFFERLIVENESS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <vector>

namespace kiln {

class BufferLiveness {
public:
  /// Analyses the body of `fn`; emits an error at `fn` and fails for a
  /// declaration or a body of more than one block.
  static mlir::FailureOr<BufferLiveness> compute(mlir::func::FuncOp fn);

  struct Buffer {
    int64_t bytes;       ///< from the type of the value that created it
    bool isArgument;     ///< created by a function argument
    mlir::Value creator; ///< the argument or result that created it
  };

  /// How one op changes memory.
  struct Step {
    /// Operand indices whose value is last read here (not the terminator's).
    llvm::SmallVector<unsigned> dyingOperands;
    /// Per result: the operand whose buffer it takes over by donation.
    llvm::SmallVector<std::optional<unsigned>> donors;
    /// Buffers this op's results create (in result order).
    llvm::SmallVector<unsigned> created;
    /// Buffers no live value refers to after this op.
    llvm::SmallVector<unsigned> released;
  };

  /// The events of `op` (an op of the analysed body, not its terminator).
  const Step &step(mlir::Operation *op) const { return steps_.find(op)->second; }
  /// Buffers created by the function's arguments (before the first op).
  llvm::ArrayRef<unsigned> argumentBuffers() const { return argumentBuffers_; }
  /// The buffer holding `value`, if it ever occupies memory.
  std::optional<unsigned> bufferOf(mlir::Value value) const;
  const Buffer &buffer(unsigned id) const { return buffers_[id]; }
  size_t numBuffers() const { return buffers_.size(); }
  mlir::Block &body() const { return *body_; }

private:
  mlir::Block *body_ = nullptr;
  std::vector<Buffer> buffers_;
  llvm::SmallVector<unsigned> argumentBuffers_;
  llvm::DenseMap<mlir::Value, unsigned> bufferOf_;
  llvm::DenseMap<mlir::Operation *, Step> steps_;
};

} // namespace kiln

#endif // KILN_ANALYSIS_BUFFERLIVENESS_H
