//===- Passes.td - hlo to hlo transforms -------------------------*- tablegen -*-===//

#ifndef KILN_DIALECT_HLO_TRANSFORMS_PASSES_TD
#define KILN_DIALECT_HLO_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def HloSinkConverts : Pass<"kiln-hlo-sink-converts", "mlir::ModuleOp"> {
  let summary = "Move bf16 converts so that bf16 values are gathered and multiplied as bf16";
  let description = [{
    After kiln-lower-to-hlo at mixed precision, every kiln.cast is a
    narrowing `convert` followed by a widening one. Exact rewrites (rounding
    commutes with moving data; a product of two bf16 values is exact in
    float32) then make the bf16 explicit where XLA and neuronx-cc see it
    (integer widening, s32 ids converted to a kiln op's s64, sinks and folds
    the same way):
    a widening convert sinks below data movement (all-gather, all-to-all,
    reshape, transpose, broadcast, slice, dynamic-slice, gather, and a pad
    whose padding value is exact in bf16), a narrowing convert of the
    only use of such an op rises above it, a narrow→wide→narrow round trip
    folds away, and a dot of two values widened from bf16 becomes a dot of
    the bf16 values with a float32 result (float32 accumulation, XLA's
    preferred-element-type form). Reductions (reduce-scatter, all-reduce)
    keep their float32 operands.
  }];
  let dependentDialects = ["::kiln::hlo::HloDialect"];
}

def HloNarrowInt64 : Pass<"kiln-hlo-narrow-int64", "mlir::ModuleOp"> {
  let summary = "Make every s64 value of the hlo module s32";
  let description = [{
    neuronx-cc computes in 32-bit integers (it downcasts s64 unless told
    `--native-int64`, and NKIPy traces int64 as int32); Kiln narrows the
    module itself so that what `kiln check-hlo` evaluates is what the
    compiler gets. Token ids, labels (< vocabulary), the step counter and
    every index derived from them become s32: arguments, results and
    instruction types; each s64 constant is rewritten (an error names one
    that does not fit in s32), and a convert left between two s32 types
    folds away. Run after kiln-lower-to-hlo.
  }];
  let dependentDialects = ["::kiln::hlo::HloDialect"];
}

#endif // KILN_DIALECT_HLO_TRANSFORMS_PASSES_TD
