//===- SafeTensorsFuzzer.cpp - libFuzzer target: the safetensors reader ---===//
//
// Any bytes as a .safetensors file: opening either fails with kiln::Error or
// yields tensors whose every element can be read and converted, both from
// the file and as a checkpoint (which reads fused experts as their members).

#include "FuzzInput.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Support/Error.h"

namespace {
/// Reads and converts every element of every float tensor named.
template <typename Source> void readEvery(const Source &source) {
  double sum = 0;
  for (const std::string &name : source.names()) {
    kiln::Tensor t = source.get(name);
    if (t.dtype() == kiln::DType::F32 || t.dtype() == kiln::DType::BF16 ||
        t.dtype() == kiln::DType::F16) {
      kiln::Tensor f = t.toF32();
      for (int64_t i = 0; i < f.numel(); ++i)
        sum += f.data<float>()[i];
    }
  }
  (void)sum;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln::fuzz::MemoryFile file(data, size);
  try {
    readEvery(*kiln::SafeTensorsFile::open(file.path()));
  } catch (const kiln::Error &) {
  }
  try {
    readEvery(kiln::Checkpoint::open(file.path()));
  } catch (const kiln::Error &) {
  }
  return 0;
}
