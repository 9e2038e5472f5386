//===- ConfigFuzzer.cpp - libFuzzer target: config.json and run configs ---===//
//
// Any bytes as a Hugging Face config.json and as a `kiln train` run config,
// JSON and TOML: each is accepted with consistent values or refused with
// kiln::Error, as are the run config's kernel override rules.

#include "FuzzInput.h"
#include "kiln/Driver/TrainConfig.h"
#include "kiln/Frontend/Qwen3Config.h"
#include "kiln/Config/ConfigDocument.h"
#include "kiln/Config/OverrideRules.h"
#include "kiln/Support/Error.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    kiln::Qwen3Config c = kiln::Qwen3Config::fromHfJson(text, "config.json");
    (void)c.parameterCount();
    (void)c.activeParameterCount();
    (void)c.toHfConfigJson();
  } catch (const kiln::Error &) {
  }
  try {
    kiln::ConfigDocument toml = kiln::ConfigDocument::parseToml(text, "run.toml");
    (void)toml.sections.dump();
    for (const auto &[key, line] : toml.lines)
      if (line < 1)
        std::abort(); // every key has its line
  } catch (const kiln::Error &) {
  }
  kiln::fuzz::MemoryFile file(data, size);
  try {
    // A model is required; the file may override it.
    kiln::TrainConfig t = kiln::TrainConfig::load(file.path(), {});
    (void)t.toJson().dump();
    // Only the inline rules: override.files would read whatever paths the
    // input names.
    (void)kiln::parseOverrideRules(t.overrides.rules, "override.rules");
  } catch (const kiln::Error &) {
  }
  return 0;
}
