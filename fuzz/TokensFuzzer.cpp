//===- TokensFuzzer.cpp - libFuzzer target: token files --------------------===//
//
// Any bytes as a tokens.json (a list of equal-length lists of token ids):
// read into a [batch, seq + 1] tensor and split into inputs and labels, or
// refused with kiln::Error.

#include "FuzzInput.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln::fuzz::MemoryFile file(data, size);
  try {
    kiln::Tensor tokens = kiln::readTokenBatch(file.path());
    if (tokens.rank() == 2 && tokens.dim(1) >= 2)
      (void)kiln::splitInputsAndLabels(tokens);
  } catch (const kiln::Error &) {
  }
  return 0;
}
