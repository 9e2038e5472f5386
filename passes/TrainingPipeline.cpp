//===- TrainingPipeline.cpp - @loss to @train_step, registered once -------===//

#include "kiln/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace kiln {

void buildTrainingPipeline(OpPassManager &pm, const OptimizerOptions &optimizer,
                           const ActivationCheckpointOptions &checkpoint,
                           const MixedPrecisionOptions &precision) {
  if (precision.param != "float32")
    pm.addPass(createMixedPrecision(precision));
  pm.addPass(createAutodiff());
  if (checkpoint.mode != "none")
    pm.addPass(createActivationCheckpoint(checkpoint));
  pm.addPass(createOptimizer(optimizer));
}

void registerKilnPassesAndPipelines() {
  registerKilnPasses();
  PassPipelineRegistration<>(
      "kiln-training",
      "Differentiate @loss and add AdamW with the default optimizer options "
      "(kiln-autodiff, kiln-optimizer): builds @loss_grad and @train_step",
      [](OpPassManager &pm) { buildTrainingPipeline(pm); });
}

} // namespace kiln
