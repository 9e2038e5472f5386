//===- CpuReferenceStep.cpp - check-hlo's reference step ------------------===//

#include "kiln/Driver/CpuReferenceStep.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"

namespace kiln {

CpuReferenceStep runCpuReferenceStep(const TrainConfig &config, const nlohmann::json &manifest,
                                     int64_t microbatches) {
  TrainConfig cpu = config;
  cpu.parallelism = TrainConfig::Parallelism{};
  // The same accumulation, over microbatches of the whole microbatch rows.
  cpu.training.globalBatchSize = manifest["batch"]["global"].get<int64_t>();
  cpu.training.localBatchSize = cpu.training.globalBatchSize / microbatches;
  cpu.training.seqLen = manifest["batch"]["seq_len"].get<int64_t>();
  cpu.explicitKeys.insert("training.local_batch_size");
  cpu.explicitKeys.insert("training.seq_len");
  // The CPU runtime in the precision the module was compiled at.
  cpu.training.mixedPrecisionParam =
      parseWord<PrecisionDtype>(manifest["mixed_precision"]["param"].get<std::string>());
  if (cpu.data.tokensFile.empty())
    fail("check-hlo: data.tokens_file must name the token batch to evaluate");
  CpuReferenceStep step;
  step.tokens = readTokenBatch(cpu.data.tokensFile);
  Trainer trainer(cpu);
  step.initial = trainer.parameters();
  step.metrics = trainer.step(step.tokens);
  step.updated = trainer.parameters();
  return step;
}

} // namespace kiln
