//===- HloKernelCall.h - An HLO custom call run by its CPU kernel -*- C++ -*-===//
//
// A custom call of Kiln's hlo module names its kernel in its backend_config
// (kiln_kernel, kiln_direction, kiln_options, and kiln_operands where an NKI
// binding orders the call's operands its own way: which of them are the
// kernel's, in Kiln's order, the output buffers left out); on the CPU it runs that
// kernel's CPU implementation, the one the eager executor runs. Both the
// reference evaluator (kiln check-hlo) and compiled mode call kernels so.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_HLOKERNELCALL_H
#define KILN_DRIVER_HLOKERNELCALL_H

#include "kiln/Runtime/Tensor.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <string>
#include <vector>

namespace kiln {

class CpuKernelImpl;

struct HloKernelCall {
  std::string instruction; ///< for errors: the instruction's name or kiln fqn
  const CpuKernelImpl *impl = nullptr;
  bool backward = false;
  mlir::DictionaryAttr options;
  /// The call's operands the CPU kernel takes, in its order; empty: all.
  std::vector<size_t> kilnOperands;

  /// Binds a custom call to the kernel its backend_config names. Throws
  /// kiln::Error naming `instruction` for a kernel without a CPU
  /// implementation or options that do not parse. The kernels must be
  /// registered (registerCustomKernels).
  static HloKernelCall parse(const std::string &instruction, const std::string &backendConfig,
                          mlir::MLIRContext &context);
  /// The kernel's results on `operands`.
  std::vector<Tensor> run(std::vector<Tensor> operands) const;
};

} // namespace kiln

#endif // KILN_DRIVER_HLOKERNELCALL_H
