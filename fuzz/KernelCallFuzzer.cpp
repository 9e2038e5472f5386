//===- KernelCallFuzzer.cpp - libFuzzer target: a custom call's backend_config
//
// Any bytes as the backend_config of a custom call that Kiln's evaluator
// runs (kiln check-hlo reads any module): HloKernelCall::parse accepts it or
// refuses it with kiln::Error; an accepted NKI binding's layouts then move
// tensors of the shapes it names (small ones) to the function's layout and
// back, which must give the same tensor. The kernels themselves are not run:
// their shapes are the module's, checked by the kernel's verifier upstream.
//
//===----------------------------------------------------------------------===//

#include "kiln/CustomKernels/Registry.h"
#include "kiln/Driver/HloKernelCall.h"
#include "kiln/Support/Error.h"

#include "mlir/IR/MLIRContext.h"

#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const bool registered = (kiln::registerCustomKernels(), true);
  static mlir::MLIRContext context;
  (void)registered;
  std::string config(reinterpret_cast<const char *>(data), size);
  try {
    kiln::HloKernelCall call = kiln::HloKernelCall::parse("custom-call.1", config, context);
    for (const kiln::HloKernelCall::BoundTensor &a : call.arguments) {
      if (kiln::numElements(a.kilnShape) > 4096)
        continue;
      kiln::Tensor t(kiln::DType::F32, a.kilnShape);
      float *v = t.mutableData<float>();
      for (int64_t i = 0; i < t.numel(); ++i)
        v[i] = float(i);
      kiln::Tensor back = kiln::HloKernelCall::fromNkiLayout(
          kiln::HloKernelCall::toNkiLayout(t, a.layout), a.layout, a.kilnShape);
      if (back.shape() != t.shape() ||
          std::memcmp(back.rawData(), t.rawData(), size_t(t.numel()) * sizeof(float)) != 0)
        __builtin_trap(); // a layout and its inverse disagree
    }
  } catch (const kiln::Error &) {
  }
  return 0;
}
