//===- TargetProfileFuzzer.cpp - libFuzzer target: kiln plan --target -----===//
//
// Any bytes as a target profile (`kiln plan --target FILE`): accepted with
// every field inside its physical range, or refused with kiln::Error. An
// accepted profile's derived figures must be finite and its reserve below
// its memory. "measured" fields read a fixed stand-in machine.

#include "kiln/Planner/TargetProfile.h"
#include "kiln/Support/Error.h"

#include <cmath>
#include <cstdlib>
#include <string>

namespace kiln {
// The built-in profiles are generated into the CMake build; parsing a
// fuzzed text never needs them.
const std::map<std::string, std::string> &builtinTargetTexts() {
  static const std::map<std::string, std::string> none;
  return none;
}
} // namespace kiln

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  kiln::MachineProbe probe;
  probe.sgemmFlops = [] { return 1e11; };
  probe.memoryBandwidth = [] { return 2e10; };
  probe.memoryBytes = [] { return int64_t(16) << 30; };
  try {
    kiln::TargetProfile t = kiln::parseTargetProfile(text, "target.json", probe);
    for (kiln::OpClass c : {kiln::OpClass::Matmul, kiln::OpClass::Attention, kiln::OpClass::Vector})
      if (!std::isfinite(t.achievedFlops(c)) || t.achievedFlops(c) <= 0)
        std::abort();
    if (t.runtimeReserveBytes < 0 || t.runtimeReserveBytes >= t.memoryBytes ||
        t.ranksPerNode % t.ranksPerDevice != 0)
      std::abort();
  } catch (const kiln::Error &) {
  }
  return 0;
}
