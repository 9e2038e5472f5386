//===- Evaluate.cpp - Capture + bind + run a checkpoint -------------------===//

#include "kiln/Driver/Evaluate.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Frontend/Capture.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"

#include "mlir/IR/MLIRContext.h"

namespace kiln {

namespace {
/// Captures the model for a [batch, seq] input, runs `fnName` on `inputs`
/// (by kiln.input name) and returns result 0.
Tensor runCaptured(const std::string &modelDir, const std::map<std::string, Tensor> &inputs,
                   const char *fnName) {
  const Tensor &ids = inputs.at(std::string(kInputIdsInput));
  Qwen3Config config = Qwen3Config::fromHfDirectory(modelDir);
  Checkpoint checkpoint = Checkpoint::open(modelDir);
  mlir::MLIRContext context;
  auto module = captureQwen3(context, config, {ids.dim(0), ids.dim(1)});
  auto fn = module->lookupSymbol<mlir::func::FuncOp>(fnName);
  return runFunction(fn, bindArguments(fn, checkpoint, inputs)).at(0);
}

void checkBatch(const Tensor &tokens, int64_t minLength) {
  if (tokens.rank() != 2)
    fail("tokens must be [batch, length], got {}", shapeToString(tokens.shape()));
  if (tokens.dim(1) < minLength)
    fail("need at least {} tokens per row{}, got {}", minLength,
         minLength > 1 ? " to predict one" : "", tokens.dim(1));
}
} // namespace

float evaluateLoss(const std::string &modelDir, const Tensor &tokens) {
  checkBatch(tokens, 2);
  InputsAndLabels split = splitInputsAndLabels(tokens);
  Tensor loss = runCaptured(
      modelDir, {{kInputIdsInput.str(), split.inputIds}, {kLabelsInput.str(), split.labels}},
      "loss");
  return *loss.data<float>();
}

Tensor evaluateLogits(const std::string &modelDir, const Tensor &ids) {
  checkBatch(ids, 1);
  return runCaptured(modelDir, {{kInputIdsInput.str(), ids}}, "forward");
}

} // namespace kiln
