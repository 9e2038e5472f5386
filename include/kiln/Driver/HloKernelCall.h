//===- HloKernelCall.h - An HLO custom call run by its CPU kernel -*- C++ -*-===//
//
// A custom call of Kiln's hlo module names its kernel in its backend_config
// (kiln_kernel, kiln_direction, kiln_options, and nki where the call is bound
// to an NKI Library function: its arguments hold Kiln's operands in the
// function's order and layouts, output buffers among them, and its results
// are the function's); on the CPU it runs that
// kernel's CPU implementation, the one the eager executor runs. Both the
// reference evaluator (kiln check-hlo) and compiled mode call kernels so.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_HLOKERNELCALL_H
#define KILN_DRIVER_HLOKERNELCALL_H

#include "kiln/Dialect/Kiln/IR/NkiBinding.h"
#include "kiln/Runtime/Tensor.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kiln {

class CpuKernelImpl;

struct HloKernelCall {
  std::string instruction; ///< for errors: the instruction's name or kiln fqn
  const CpuKernelImpl *impl = nullptr;
  bool backward = false;
  mlir::DictionaryAttr options;
  /// A call bound to an NKI function: which Kiln tensor each argument and
  /// result holds, and in which layout. Unbound: the call's operands and
  /// results are Kiln's.
  struct BoundTensor {
    NkiResult::Role role = NkiResult::Role::KilnResult; ///< results only
    bool kilnOperand = false;                           ///< arguments: else a buffer
    size_t kilnIndex = 0;
    Shape kilnShape;
    NkiTensorLayout layout;
    std::optional<NkiRoutedTensor> routed; ///< arguments of the blockwise MoE form
  };
  bool bound = false;
  std::vector<BoundTensor> arguments, results;
  /// A call in nkilib's blockwise MoE form (its routed arguments): the
  /// block size. It runs by the NKI function's semantics (BlockwiseMoe.h),
  /// not by Kiln's kernel.
  std::optional<int64_t> blockSize;

  /// Binds a custom call to the kernel its backend_config names. Throws
  /// kiln::Error naming `instruction` for a kernel without a CPU
  /// implementation or options that do not parse. The kernels must be
  /// registered (registerCustomKernels).
  static HloKernelCall parse(const std::string &instruction, const std::string &backendConfig,
                          mlir::MLIRContext &context);
  /// The kernel's results on `operands`.
  std::vector<Tensor> run(std::vector<Tensor> operands) const;

  /// Kiln's tensor `t` laid out as an NKI function takes it, and back.
  static Tensor toNkiLayout(const Tensor &t, const NkiTensorLayout &layout);
  static Tensor fromNkiLayout(const Tensor &t, const NkiTensorLayout &layout,
                              const Shape &kilnShape);

private:
  void readBinding(const nlohmann::json &nki);
  std::vector<Tensor> runBlockwise(const std::vector<Tensor> &operands) const;
};

} // namespace kiln

#endif // KILN_DRIVER_HLOKERNELCALL_H
