//===- KilnInterfaces.td - Interfaces every kiln op implements -*- tablegen -*-===//
//
// The semantics of an op live with the op: its cost and its CPU kernel are
// found through these interfaces, never through switches over op kinds.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_INTERFACES_TD
#define KILN_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Kiln_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    Work done by one execution of the op, from its static shapes: floating
    point operations and bytes read and written at the op's element types.
    The planner and the MFU report sum these.
  }];
  let methods = [
    InterfaceMethod<"Floating point operations (a multiply-add counts 2).",
      "int64_t", "getFlops">,
    InterfaceMethod<"Bytes read from memory; defaults to all operands.",
      "int64_t", "getBytesRead", (ins), [{}],
      [{ return ::kiln::tensorBytes($_op->getOperandTypes()); }]>,
    InterfaceMethod<"Bytes written to memory; defaults to all results.",
      "int64_t", "getBytesWritten", (ins), [{}],
      [{ return ::kiln::tensorBytes($_op->getResultTypes()); }]>,
  ];
}

def Kiln_CpuKernelOpInterface : OpInterface<"CpuKernelOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    Binds the op to its host kernel. The CPU executor calls `runOnCpu` with
    the operand values (float tensors as f32, ids as i64/i32) and receives one
    tensor per result. Kernels throw kiln::Error on data errors such as an
    out-of-range token id.

    An operand the executor no longer needs after this op is handed over
    (moved), so it may be the only reference to its buffer; a result may then
    be written into the buffer of the operand `getInPlaceOperand` names for it,
    when Tensor::isUniquelyOwned says nothing else can see it.
  }];
  let methods = [
    InterfaceMethod<"Computes the op's results from host tensors.",
      "void", "runOnCpu",
      (ins "::llvm::MutableArrayRef<::kiln::Tensor>":$operands,
           "::llvm::SmallVectorImpl<::kiln::Tensor> &":$results)>,
    InterfaceMethod<[{The operand whose buffer result `result` may reuse when
      that operand dies at this op, if any. The memory planner mirrors the
      kernel's choice with it.}],
      "std::optional<unsigned>", "getInPlaceOperand", (ins "unsigned":$result), [{}],
      [{ return std::nullopt; }]>,
  ];
}

def Kiln_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    The op's vector-Jacobian product, emitted as kiln ops: given the
    cotangents of its results (null where none flows back), build the
    cotangents of its operands (null for non-differentiable operands such as
    token ids or the RoPE cache). Ops whose backward is a kernel in its own
    right emit a named backward op that reads the forward's saved values.
  }];
  let methods = [
    InterfaceMethod<"Builds the operand cotangents at the builder's insertion point.",
      "void", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // KILN_INTERFACES_TD
