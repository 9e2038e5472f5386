//===- PipelineStageExecutor.h - Stage functions run as scheduled -*- C++ -*-===//
//
// A pipeline rank's stage functions (PipelineStageFunctions.h) run by the
// CPU executor as runPipelineSchedule calls them: each forward on its
// microbatch's inputs, the parameters and what it received, keeping its
// residuals (and the activations it received) until that microbatch's
// backward; each backward's gradients summed over the microbatches.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PIPELINESTAGEEXECUTOR_H
#define KILN_DRIVER_PIPELINESTAGEEXECUTOR_H

#include "kiln/Backend/CPU/ExecutionContext.h"
#include "kiln/Backend/CPU/PipelineRunner.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Runtime/TokenBatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>

namespace kiln {

class PipelineStageExecutor {
public:
  /// `module` holds @loss_stage<s>_forward and _backward of every stage;
  /// `parameters` (by HF key) at least those of the stages this rank runs,
  /// each as the stage functions take it (a rank's slice of partitioned
  /// stages'), and `microbatches` likewise. The functions run in
  /// `execution`, whose grid partitioned stages' collectives use.
  PipelineStageExecutor(mlir::ModuleOp module, int64_t numStages, TensorMap parameters,
                        std::vector<InputsAndLabels> microbatches,
                        const ExecutionContext &execution = {});

  /// The calls runPipelineSchedule makes on this rank.
  PipelineStageCalls calls();
  /// The loss of each microbatch whose last stage ran here (its mean over
  /// the microbatch's tokens).
  const std::map<int64_t, float> &losses() const { return losses_; }
  /// This rank's stages' parameter gradients by HF key, summed over the
  /// microbatches (each the gradient of its microbatch's mean loss).
  const TensorMap &gradients() const { return gradients_; }

private:
  struct Kept {
    std::map<int64_t, Tensor> residuals, received; // by kiln.residual / kiln.transfer
  };
  std::vector<Tensor> forward(int64_t stage, int64_t m, std::vector<Tensor> received);
  std::vector<Tensor> backward(int64_t stage, int64_t m, std::vector<Tensor> cotangents);
  /// `fn`'s arguments for microbatch `m`: parameters, the microbatch's
  /// inputs, what `kept` holds, the cotangents by transfer number.
  std::vector<Tensor> argumentsOf(mlir::func::FuncOp fn, int64_t m, const Kept &kept,
                                  const std::map<int64_t, Tensor> &cotangents) const;
  /// The transfer numbers crossing from stage b to b + 1, in order.
  std::vector<int64_t> transferNumbers(int64_t b) const;

  mlir::ModuleOp module_;
  int64_t numStages_;
  TensorMap parameters_, gradients_;
  std::vector<InputsAndLabels> microbatches_;
  std::map<std::pair<int64_t, int64_t>, Kept> kept_;
  std::map<int64_t, float> losses_;
  ExecutionContext execution_;
};

} // namespace kiln

#endif // KILN_DRIVER_PIPELINESTAGEEXECUTOR_H
