//===- SafeTensorsFuzzer.cpp - libFuzzer target: the safetensors reader ---===//
//
// Any bytes as a .safetensors file: opening either fails with kiln::Error or
// yields tensors whose every element can be read and converted.

#include "FuzzInput.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Support/Error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln::fuzz::MemoryFile file(data, size);
  try {
    auto st = kiln::SafeTensorsFile::open(file.path());
    double sum = 0;
    for (const std::string &name : st->names()) {
      kiln::Tensor t = st->get(name);
      if (t.dtype() == kiln::DType::F32 || t.dtype() == kiln::DType::BF16 ||
          t.dtype() == kiln::DType::F16) {
        kiln::Tensor f = t.toF32();
        for (int64_t i = 0; i < f.numel(); ++i)
          sum += f.data<float>()[i];
      }
    }
    (void)sum;
  } catch (const kiln::Error &) {
  }
  return 0;
}
