//===- CpuKernelImpl.h - A substituted kernel's CPU implementation -*- C++ -*-===//
//
// The CPU target's half of a kernel: a KernelSpec that also derives from
// CpuKernelImpl runs on the host, and kiln.kernel / kiln.kernel_backward
// dispatch to it. Operands arrive in the kernel's layout, as the IR gives
// them.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_CPU_CPUKERNELIMPL_H
#define KILN_BACKEND_CPU_CPUKERNELIMPL_H

#include "kiln/Backend/CPU/ExecutionContext.h"
#include "kiln/Runtime/Tensor.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln {

class CpuKernelImpl {
public:
  // Inline, so that the kernels (lib/CustomKernels) link without the CPU backend's
  // kernels, as the IR fuzzer links them.
  virtual ~CpuKernelImpl() = default;
  /// Computes the kiln.kernel's results from its operands; `options` is the
  /// op's options dictionary.
  virtual void runForward(mlir::DictionaryAttr options, llvm::MutableArrayRef<Tensor> operands,
                          llvm::SmallVectorImpl<Tensor> &results) const = 0;
  /// The same for kiln.kernel_backward.
  virtual void runBackward(mlir::DictionaryAttr options, llvm::MutableArrayRef<Tensor> operands,
                           llvm::SmallVectorImpl<Tensor> &results) const = 0;
};

} // namespace kiln

#endif // KILN_BACKEND_CPU_CPUKERNELIMPL_H
