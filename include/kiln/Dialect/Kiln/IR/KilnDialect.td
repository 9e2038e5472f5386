//===- KilnDialect.td - The kiln dialect -------------------*- tablegen -*-===//

#ifndef KILN_DIALECT_TD
#define KILN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Model-level ops for capturing and compiling Qwen3 training";
  let description = [{
    One op per model module (embedding, rms_norm, linear, rope, attention,
    swiglu, cross-entropy, ...). Every op carries an `fqn` string attribute
    with its module path in torchtitan's Qwen3 naming so that override rules
    written for torchtitan (`layers.1[0-9].attention.rope`) match unchanged.
    Tensors have static shapes; float tensors may be f32, bf16 or f16 and
    token ids i64 or i32.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let useDefaultAttributePrinterParser = 1;
  // Folds that remove real work (KilnCanonicalize.cpp).
  let hasCanonicalizer = 1;
  // The kiln.* attributes on functions, arguments, results and ops
  // (kiln.param, kiln.state, kiln.saved, ...) are verified by the dialect.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

#endif // KILN_DIALECT_TD
