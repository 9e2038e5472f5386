//===- EvalCommand.cpp - kiln eval ----------------------------------------===//

#include "Commands.h"
#include "kiln/Driver/Evaluate.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Error.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fmt/core.h>

namespace kiln {

int runEval(const std::vector<std::string> &args) {
  OptionList options("eval", args, {"json"});
  std::string model = options.required("model");
  std::string tokensPath = options.required("tokens");
  bool json = options.flag("json");
  options.finish();
  if (!std::filesystem::is_directory(model))
    fail("eval: --model '{}' must be a Hugging Face directory with config.json and "
         "safetensors weights",
         model);

  Tensor tokens = readTokenBatch(tokensPath);
  float loss = evaluateLoss(model, tokens);
  int64_t predictions = tokens.dim(0) * (tokens.dim(1) - 1);
  if (json) {
    nlohmann::json out = {{"loss", loss}, {"predictions", predictions}};
    fmt::print("{}\n", out.dump());
  } else {
    fmt::print("loss {:.7f} over {} predictions\n", loss, predictions);
  }
  return 0;
}

} // namespace kiln
