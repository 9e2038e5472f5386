//===- KilnInterfaces.td - Interfaces every kiln op implements -*- tablegen -*-===//
//
// The semantics of an op live with the op: its cost, its VJP and the buffers
// its results may reuse are found through these interfaces, never through
// switches over op kinds. Targets attach their own interfaces (the CPU
// kernels: kiln/Backend/CPU/CpuKernelInterface.td) as external models.
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
    The planner and the MFU report sum these. FLOPs are doubles, computed
    in double from the shapes: the global step of a large model at a
    realistic batch passes int64 (the forward of Llama 3.1 405B over 4096 x
    4096 tokens is 1.4e19 FLOPs, Qwen3-235B-A22B's training step over 4096
    ranks x 8 x 2048 tokens 1e19); bytes stay int64, as every tensor has at
    most 2^50 elements.
  }];
  let methods = [
    InterfaceMethod<"Floating point operations (a multiply-add counts 2).",
      "double", "getFlops">,
    InterfaceMethod<"Bytes read from memory; defaults to all operands.",
      "int64_t", "getBytesRead", (ins), [{}],
      [{ return ::kiln::tensorBytes($_op->getOperandTypes()); }]>,
    InterfaceMethod<"Bytes written to memory; defaults to all results.",
      "int64_t", "getBytesWritten", (ins), [{}],
      [{ return ::kiln::tensorBytes($_op->getResultTypes()); }]>,
    InterfaceMethod<[{FLOPs of the largest group of work that runs as one unit
      under the worst data-dependent load (a MoE layer's busiest expert when
      every token is routed to it); the op's FLOPs when its work is not
      grouped by data.}],
      "double", "getPeakGroupFlops", (ins), [{}],
      [{ return $_op.getFlops(); }]>,
    InterfaceMethod<[{The class whose achieved peak the op's FLOPs run at on a
      target (kiln::OpClass): GEMMs and attention override the default,
      vector work.}],
      "::kiln::OpClass", "getOpClass", (ins), [{}],
      [{ return ::kiln::OpClass::Vector; }]>,
    InterfaceMethod<[{Appends the BLAS GEMMs the op's CPU kernel issues
      (kiln::GemmShape), for a target that times GEMMs by shape; none by
      default (the op's FLOPs then run at its class's achieved peak).}],
      "void", "getGemms", (ins "::llvm::SmallVectorImpl<::kiln::GemmShape> &":$gemms), [{}],
      [{ (void)gemms; }]>,
  ];
}

// An op's extraClassDeclaration shadowing getOpClass's default.
defvar Kiln_MatmulClass =
    [{ ::kiln::OpClass getOpClass() { return ::kiln::OpClass::Matmul; } }];
// A GEMM op's: its class and the one sgemm its CPU kernel issues.
defvar Kiln_GemmOp = Kiln_MatmulClass # [{
    void getGemms(::llvm::SmallVectorImpl<::kiln::GemmShape> &gemms);
}];
defvar Kiln_AttentionClass =
    [{ ::kiln::OpClass getOpClass() { return ::kiln::OpClass::Attention; } }];

def Kiln_TiedOperandOpInterface : OpInterface<"TiedOperandOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    In-place reuse as an IR-level fact: a result may take over the buffer of
    the operand `getTiedOperand` names for it, when that operand dies at this
    op (its last use, not repeated among the operands) and no other live
    value shares its buffer. AdamW's new parameter and moments overwrite the
    old ones; a residual add writes into its stream. BufferLiveness decides
    each donation once, for every target and for the memory plan.
  }];
  let methods = [
    InterfaceMethod<"The operand whose buffer result `result` may reuse, if any.",
      "std::optional<unsigned>", "getTiedOperand", (ins "unsigned":$result)>,
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
    InterfaceMethod<[{Builds the operand cotangents at the builder's insertion
      point; emits an error and fails for a cotangent it cannot take.}],
      "::mlir::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

def Kiln_BackwardOpInterface : OpInterface<"BackwardOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    A backward op, linear in the cotangents it reads: when every one of them
    is a zero constant, so is each result, and the dialect's canonicalization
    replaces the op by zeros. Its other operands are saved forward values.
  }];
  let methods = [
    InterfaceMethod<"The operands that carry cotangents.",
      "::llvm::SmallVector<::mlir::Value>", "getCotangents">,
  ];
}

def Kiln_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    How the op may be split over the device grid, as a loop nest
    (kiln::ShardingRule): which loops may be split, and which loop each
    operand and result dimension follows. Splitting a loop a result does not
    follow makes that result a partial sum. kiln-shard decides each loop's
    grid axes from these rules; kiln-partition clones the op on local shapes
    and lets the clone adapt itself to its share (localize).
  }];
  let methods = [
    InterfaceMethod<"The op's loops and how its operands and results follow them.",
      "::kiln::ShardingRule", "getShardingRule">,
    InterfaceMethod<[{
        Adapts `clone`, this op cloned by kiln-partition onto one rank's
        operands and result types, to the rank's share of the work under
        `loops` (the grid axes of each loop of getShardingRule) on a grid of
        `gridShape`: the attributes that depend on the split (a reshape's
        target shape, a vocabulary or expert shard's axes, the global count
        a mean divides by). Fails, with an error on this op, where the split
        cannot be taken. Most ops need nothing: the default.
      }], "::mlir::LogicalResult", "localize",
      (ins "::mlir::Operation *":$clone, "const ::kiln::LoopSharding &":$loops,
           "::llvm::ArrayRef<int64_t>":$gridShape),
      /*methodBody=*/[{}], /*defaultImplementation=*/[{ return ::mlir::success(); }]>,
  ];
}

#endif // KILN_INTERFACES_TD
