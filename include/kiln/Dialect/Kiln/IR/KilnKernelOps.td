//===- KilnKernelOps.td - Substituted kernels and layouts --*- tablegen -*-===//
//
// What kiln-substitute-kernels leaves in the IR: calls of registered kernels
// (kiln::KernelSpec) in place of the ops they replace, and the transposes
// into and out of the layout a kernel expects. A kernel's semantics (types,
// cost, sharding, VJP) live with its KernelSpec, found by name. Included
// from KilnOps.td.
//
//===----------------------------------------------------------------------===//

def Kiln_TransposeOp : Kiln_Op<"transpose", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "Permutes the dimensions of a tensor";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`. Inserted around a
    kernel that expects another layout (NKI's rope and flash attention take
    `[batch, heads, seq, head_dim]`, Kiln keeps `[batch, seq, heads,
    head_dim]`); a transpose of a transpose that undoes it folds away.

    Example:

    ```mlir
    %qt = kiln.transpose %q {permutation = array<i64: 0, 2, 1, 3>,
                             fqn = "layers.0.attention.rope"}
        : (tensor<2x128x16x128xf32>) -> tensor<2x16x128x128xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, DenseI64ArrayAttr:$permutation, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
  let hasFolder = 1;
}

// Kernel calls: operands and result types are explicit (a kernel's signature
// is its KernelSpec's, checked by the verifier), so they are not Kiln_Op.
class Kiln_KernelCallOp<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits # [
        Pure, Kiln_HasModulePath,
        DeclareOpInterfaceMethods<Kiln_CostOpInterface>,
        DeclareOpInterfaceMethods<Kiln_ShardingRuleOpInterface, ["localize"]>]> {
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, StrAttr:$kernel, StrAttr:$rule,
                       StrAttr:$target, DictionaryAttr:$options, StrAttr:$fqn);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat =
      "$kernel `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)";
  let hasVerifier = 1;
  code commonDeclaration = [{
    /// The registered kernel this op calls (the verifier made sure it exists).
    const ::kiln::KernelSpec &getSpec();
    /// Shadows the CostOpInterface default: the kernel's class.
    ::kiln::OpClass getOpClass() { return getSpec().opClass(); }
    /// Shadows the CostOpInterface default: the GEMMs of the kernel's CPU form.
    void getGemms(::llvm::SmallVectorImpl<::kiln::GemmShape> &gemms);
    /// Shadow the CostOpInterface defaults: operands (results) plus half of
    /// the kernel's passBytes each.
    int64_t getBytesRead();
    int64_t getBytesWritten();
  }];
}

def Kiln_KernelOp : Kiln_KernelCallOp<"kernel", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "A registered kernel's forward, in place of the op it replaced";
  let description = [{
    Put there by kiln-substitute-kernels for override rule `rule`: `kernel`
    (a kiln::KernelSpec) replaces an op named `target` at module path `fqn`.
    `options` holds the rule's options and the replaced op's attributes the
    kernel needs (scale, eps, ...). Operands and results are in the kernel's
    layout; results may include values saved for the backward (attention's
    log-sum-exp). The VJP is the kernel's own backward, `kiln.kernel_backward`
    of the same kernel, so a substitution covers both directions. Both run
    at the kernel's op class (the planner's roofline class): the replaced
    op's, or matmul for a kernel that fuses a GEMM.

    Example:

    ```mlir
    %qo, %ko = kiln.kernel "nki_rope"(%qt, %kt, %cache)
        {rule = "rope", target = "kiln.rope", options = {},
         fqn = "layers.0.attention.rope"}
        : (tensor<2x16x256x128xf32>, tensor<2x8x256x128xf32>, tensor<256x256xf32>)
        -> (tensor<2x16x256x128xf32>, tensor<2x8x256x128xf32>)
    ```
  }];
  let extraClassDeclaration = commonDeclaration;
}

def Kiln_KernelBackwardOp : Kiln_KernelCallOp<"kernel_backward", [
    DeclareOpInterfaceMethods<Kiln_BackwardOpInterface>]> {
  let summary = "A registered kernel's backward, built by its kiln.kernel's VJP";
  let description = [{
    Reads cotangents (which operands, the KernelSpec says) and saved forward
    values; computes the cotangents of the forward kernel's operands.

    Example:

    ```mlir
    %dq, %dk = kiln.kernel_backward "nki_rope"(%dqo, %dko, %cache)
        {rule = "rope", target = "kiln.rope", options = {},
         fqn = "layers.0.attention.rope"}
        : (tensor<2x16x256x128xf32>, tensor<2x8x256x128xf32>, tensor<256x256xf32>)
        -> (tensor<2x16x256x128xf32>, tensor<2x8x256x128xf32>)
    ```
  }];
  let extraClassDeclaration = commonDeclaration;
}
