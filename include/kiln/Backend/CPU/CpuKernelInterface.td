//===- CpuKernelInterface.td - The CPU target's op binding -*- tablegen -*-===//
//
// Attached to kiln ops as external models by the CPU backend
// (registerCpuKernels), so the dialect itself knows nothing of host kernels.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CPU_KERNEL_INTERFACE_TD
#define KILN_CPU_KERNEL_INTERFACE_TD

include "mlir/IR/OpBase.td"

def CpuKernelOpInterface : OpInterface<"CpuKernelOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    Binds an op to its host kernel. The executor calls `runOnCpu` with the
    execution context and the operand values (float tensors as f32, ids as
    i64/i32) and receives one tensor per result. Kernels throw kiln::Error on
    data errors such as an out-of-range token id.

    An operand that BufferLiveness donates to a result (TiedOperandOpInterface)
    is handed over by move, so it is the only reference to its buffer and the
    kernel may write that result into it (Tensor::isUniquelyOwned).
  }];
  let methods = [
    InterfaceMethod<"Computes the op's results from host tensors.",
      "void", "runOnCpu",
      (ins "const ::kiln::ExecutionContext &":$context,
           "::llvm::MutableArrayRef<::kiln::Tensor>":$operands,
           "::llvm::SmallVectorImpl<::kiln::Tensor> &":$results)>,
  ];
}

#endif // KILN_CPU_KERNEL_INTERFACE_TD
