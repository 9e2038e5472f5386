//===- EvalCommand.cpp - kiln eval ----------------------------------------===//

#include "Commands.h"
#include "kiln/Driver/Evaluate.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Error.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fmt/core.h>

namespace kiln {

namespace {
/// Names the first checkpoint tensor holding a NaN or an infinity, if any.
std::string describeNonFinite(const std::string &model) {
  Checkpoint checkpoint = Checkpoint::open(model);
  for (const std::string &name : checkpoint.names()) {
    Tensor t = checkpoint.get(name);
    if (t.dtype() != DType::F32 && t.dtype() != DType::BF16 && t.dtype() != DType::F16)
      continue;
    Tensor f = t.dtype() == DType::F32 ? t : t.toF32();
    const float *p = f.data<float>();
    for (int64_t i = 0; i < f.numel(); ++i)
      if (!std::isfinite(p[i]))
        return fmt::format("tensor '{}' of {} holds {} at element {}", name, model, p[i], i);
  }
  return fmt::format("every weight of {} is finite, so the computation overflowed", model);
}
} // namespace

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
  if (!std::isfinite(loss))
    fail("eval: the loss is {}: {}", loss, describeNonFinite(model));
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
