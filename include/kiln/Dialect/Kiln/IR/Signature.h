//===- Signature.h - Roles of a function's arguments and results -*- C++ -*-===//
//
// The one place that reads a function's kiln.* argument and result
// attributes and says which argument is which parameter, piece of optimizer
// state or data input, and which result is which gradient or output. The
// optimizer pass, the Trainer and the partitioner find values by these roles,
// never by argument positions.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_SIGNATURE_H
#define KILN_DIALECT_KILN_IR_SIGNATURE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace kiln {

/// A function's arguments and results by role. Every argument must have a
/// role (kiln.param, kiln.state, kiln.input or kiln.grad, a gradient a
/// pipeline rank's update takes, or a pipeline stage's kiln.transfer,
/// kiln.cotangent or kiln.residual); results without one are allowed (e.g.
/// @forward's logits).
class Signature {
public:
  /// Reads the roles of `fn`; emits an error at `fn` and fails when an
  /// argument has none or the function is a declaration.
  static mlir::FailureOr<Signature> get(mlir::func::FuncOp fn);

  struct Slot {
    unsigned index;
    std::string name;
    /// A data input's microbatch (kiln.microbatch); 0 for everything else.
    int64_t microbatch = 0;
  };
  /// Arguments tagged kiln.param (HF keys), in argument order.
  llvm::ArrayRef<Slot> params() const { return params_; }
  /// Arguments tagged kiln.input, in argument order (each name once per
  /// microbatch).
  llvm::ArrayRef<Slot> inputs() const { return inputs_; }
  /// Arguments tagged kiln.state, in argument order.
  llvm::ArrayRef<Slot> state() const { return state_; }
  /// Arguments tagged kiln.grad (HF keys), in argument order.
  llvm::ArrayRef<Slot> grads() const { return grads_; }
  /// A pipeline stage's arguments from another stage or its own forward
  /// (kiln.transfer, kiln.cotangent, kiln.residual = N), in argument order;
  /// each named "<role> N".
  llvm::ArrayRef<Slot> activations() const { return activations_; }

  /// Index of the argument tagged `role` = `name` (kParamAttr, ...); of a
  /// data input, its microbatch 0.
  std::optional<unsigned> argument(llvm::StringRef role, llvm::StringRef name) const;
  /// Index of the result tagged `role` = `name` (kGradAttr, kOutputAttr, ...).
  std::optional<unsigned> result(llvm::StringRef role, llvm::StringRef name) const;

  mlir::func::FuncOp function() const { return fn_; }

private:
  mlir::func::FuncOp fn_;
  llvm::SmallVector<Slot> params_, inputs_, state_, grads_, activations_;
  llvm::StringMap<unsigned> arguments_, results_; ///< "role\0name" -> index
};

/// @train_step's signature (kiln-optimizer's output): for each parameter its
/// argument and updated result, and those of its AdamW moments; the update
/// count; the data inputs; and the loss and gradient-norm outputs.
struct TrainStepSignature {
  struct Param {
    std::string key;
    unsigned arg, result;
    unsigned expAvgArg, expAvgResult;
    unsigned expAvgSqArg, expAvgSqResult;
  };
  llvm::SmallVector<Param> params;
  unsigned stepArg = 0, stepResult = 0;
  llvm::SmallVector<Signature::Slot> inputs;
  unsigned lossResult = 0, gradNormResult = 0;
  /// Other scalar outputs (e.g. "aux_loss"), logged beside the loss.
  llvm::SmallVector<Signature::Slot> metrics;
  /// State other than the step and the moments (a MoE router's expert
  /// bias): its name, argument and updated result; zeros at the start.
  struct OtherState {
    std::string name;
    unsigned arg, result;
  };
  llvm::SmallVector<OtherState> otherState;

  /// Emits an error at `fn` naming the first missing role.
  static mlir::FailureOr<TrainStepSignature> get(mlir::func::FuncOp fn);
};

/// The optimizer-state names of a parameter's moments.
std::string expAvgName(llvm::StringRef key);
std::string expAvgSqName(llvm::StringRef key);
/// The state name of a MoE router's expert bias (aux-loss-free balancing).
std::string expertBiasName(llvm::StringRef routerFqn);
/// The data inputs a captured model takes: token ids and next-token labels,
/// both [batch, seq].
inline constexpr llvm::StringLiteral kInputIdsInput = "input_ids";
inline constexpr llvm::StringLiteral kLabelsInput = "labels";
/// The state name of the update count, and the output names.
inline constexpr llvm::StringLiteral kStepState = "step";
inline constexpr llvm::StringLiteral kLossOutput = "loss";
inline constexpr llvm::StringLiteral kGradNormOutput = "grad_norm";
/// The router's load-balancing loss of a MoE model, a metric output of @loss.
inline constexpr llvm::StringLiteral kAuxLossOutput = "aux_loss";

/// The results of `fn` tagged kiln.output other than the loss and the
/// gradient norm: metrics computed alongside, not differentiated.
llvm::SmallVector<Signature::Slot> metricOutputs(mlir::func::FuncOp fn);

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_SIGNATURE_H
