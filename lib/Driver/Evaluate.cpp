//===- Evaluate.cpp - Capture + bind + run a checkpoint -------------------===//

#include "kiln/Driver/Evaluate.h"
#include "kiln/Execution/Executor.h"
#include "kiln/Frontend/Capture.h"
#include "kiln/Support/Error.h"

#include "mlir/IR/MLIRContext.h"

namespace kiln {

namespace {
/// Captures the model for `tokens`' batch, runs `fnName` and returns result 0.
Tensor runCaptured(const std::string &modelDir, const Tensor &tokens, const char *fnName,
                   int64_t seq) {
  if (tokens.rank() != 2)
    fail("tokens must be [batch, length], got {}", shapeToString(tokens.shape()));
  Qwen3Config config = Qwen3Config::fromHfDirectory(modelDir);
  Checkpoint checkpoint = Checkpoint::open(modelDir);
  mlir::MLIRContext context;
  auto module = captureQwen3(context, config, {tokens.dim(0), seq});
  auto fn = module->lookupSymbol<mlir::func::FuncOp>(fnName);
  std::vector<Tensor> args = bindArguments(fn, checkpoint, {{"tokens", tokens}});
  return runFunction(fn, args).at(0);
}
} // namespace

float evaluateLoss(const std::string &modelDir, const Tensor &tokens) {
  if (tokens.rank() == 2 && tokens.dim(1) < 2)
    fail("need at least 2 tokens per row to predict one, got {}", tokens.dim(1));
  Tensor loss = runCaptured(modelDir, tokens, "loss", tokens.rank() == 2 ? tokens.dim(1) - 1 : 0);
  return *loss.data<float>();
}

Tensor evaluateLogits(const std::string &modelDir, const Tensor &ids) {
  return runCaptured(modelDir, ids, "forward", ids.rank() == 2 ? ids.dim(1) : 0);
}

} // namespace kiln
