//===- Passes.td - hlo to linalg (compiled mode) ------------*- tablegen -*-===//

#ifndef KILN_PASSES_HLOTOLINALG_PASSES_TD
#define KILN_PASSES_HLOTOLINALG_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertHloToLinalg : Pass<"kiln-convert-hlo-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower the hlo dialect to linalg on tensors, for the CPU JIT of compiled mode";
  let description = [{
    Every hlo op becomes upstream MLIR on tensors: elementwise ops,
    broadcasts, transposes, iota, gather and reductions become linalg ops
    (`linalg.generic`, `linalg.transpose`, `linalg.reduce`; `linalg.matmul`
    and `linalg.batch_matmul` where a dot_general has their form; a float32
    dot whose operands are row-major matrices per batch a call of the
    host's sgemm, `kiln_sgemm`), slices,
    reshapes, concatenation and padding become `tensor` ops, scatter an
    `scf.for` over the updates, an opt-barrier its operands, a custom call a
    call of the host's `kiln_custom_call` with its site and the pointers of
    its operand and result buffers (kiln/Passes/HloToLinalg/HostCalls.h), a
    collective (all-gather, reduce-scatter, all-reduce, all-to-all) or the
    replica id a call of the host's `kiln_collective` the same way (the host
    runs it over MPI among the group's ranks). The result is
    what one-shot bufferization and the LLVM lowering of compiled mode take
    (docs/compiled.md). XLA's semantics are kept where they differ from the
    obvious: dynamic-slice and gather clamp their start indices into the
    operand, scatter skips updates whose window leaves the operand, maximum
    and minimum propagate NaN. ui32 values become signless i32 with their
    unsigned meaning kept by compare, convert, divide and the rest.

    The functions' `kiln.*` argument and result attributes (the Neuron
    artifact's parameter and output names, which the manifest keeps) are
    dropped: bufferization turns results into arguments, where they would
    repeat.

    An hlo op without a lowering is an error naming the op; its location is
    the kiln fqn it came from.
  }];
  let options = [
    Option<"blas", "blas", "bool", "true",
           "float32 dot_generals of the matmul form call the host's sgemm "
           "(kiln_sgemm, OpenBLAS); off: every dot is a linalg op (for running "
           "the lowered IR without Kiln's host, e.g. in mlir-runner)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"
  ];
}

def FuseElementwise : Pass<"kiln-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Fuse elementwise linalg ops into their consumers, reductions included, "
                "recomputing a cheap producer in each of several consumers";
  let description = [{
    Upstream's elementwise fusion (`linalg::populateElementwiseOpsFusionPatterns`,
    with reshape propagation, canonicalization and constant folding, as
    `linalg-fuse-elementwise-ops` runs them) under a different control: a
    producer with several uses fuses too when it is cheap (all-parallel,
    at most `max-recomputed-ops` ops in its body) and every user is a
    `linalg.generic` that reads each of its elements once (a permutation
    map: a dot would recompute it on every contraction step), so that each
    consumer recomputes it and its tensor is never written. On a training step this is what keeps AdamW's
    temporaries (the clipped gradient, read by the two moments and the
    update) and a gradient norm's squares (fused into the reduction, a
    `linalg.generic` with reduction iterators) from being materialized.
  }];
  let options = [
    Option<"maxRecomputedOps", "max-recomputed-ops", "unsigned", "8",
           "the largest body of a producer recomputed in several consumers">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect"];
}

def OutlineLoops : Pass<"kiln-outline-loops", "mlir::ModuleOp"> {
  let summary = "Outline each top-level loop nest of a function into a function of its own";
  let description = [{
    A training step lowered to loops is one function of hundreds of loop
    nests, on which LLVM's optimizer is superlinear (the fixture's step:
    45 s at -O3, where code generation alone takes 4). Each top-level
    `scf.for` of a function without results becomes a private function
    (`<name>_loop<i>`, marked `noinline` for LLVM) called in its place;
    the values it uses from above are its arguments, except constants and
    `memref.get_global`s, which are cloned into it. LLVM then optimizes
    many small functions, each in time proportional to its size.

    With `parallel-work` (0, the default: never), a top-level `scf.parallel`
    (convert-linalg-to-parallel-loops) of at least that many innermost
    iterations, step 1 on its outermost dimension and no call or
    allocation inside, runs across the host's threads: its function takes
    the outermost dimension's bounds as two more parameters and stays
    public (the JIT gives it a packed wrapper), and the nest becomes a call
    of `kiln_parallel_for` with its site, its bounds and the words of its
    arguments (HostCalls.h); the module's `kiln.parallel_loops` lists the
    functions by site.
  }];
  let options = [
    Option<"parallelWork", "parallel-work", "int64_t", "0",
           "Innermost iterations from which a parallel loop nest runs on the host's threads (0: never)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect"];
}

def CompactBuffers : Pass<"kiln-compact-buffers", "mlir::func::FuncOp"> {
  let summary = "Free each temporary after its last use; compute results in their out-parameters, the state in its old buffer where safe";
  let description = [{
    Runs on bufferized functions after `buffer-results-to-out-params` and
    `buffer-deallocation-pipeline`, whose ownership-based deallocation frees
    a buffer at the end of the block that allocated it: on a training step,
    one block, every temporary stays live to the end (the fixture's step
    held the sum of its buffers). Two rewrites of the function's body:

    - a `memref.dealloc` moves to just after the last use of the buffer or
      of any view of it (BufferViewFlowAnalysis), counting the uses of its
      data pointer (`memref.extract_aligned_pointer_as_index`, the host
      calls' tables) up to the call that reads it;
    - a buffer allocated in the body whose contents are only copied into an
      out-parameter at the end (`memref.copy %buffer, %out`, the out-
      parameter used nowhere else) is that out-parameter: the copy, the
      allocation and its dealloc go.

    Only top-level deallocs of top-level allocations move; anything else
    (a dealloc under a condition) stays.

    Then the state the step updates (`kiln.input_output_alias`, which
    `kiln-convert-hlo-to-linalg` records: by result, the argument it
    updates) is matched with its buffers: an out-parameter may share its
    argument's buffer when every read of the argument (its views and its
    data pointer included) comes before the out-parameter's first use, or
    is that use, an elementwise linalg op reading the argument itself with
    the map it writes the out-parameter with and not reading the
    out-parameter's old contents. The result is `kiln.out_param_buffers`
    (StateAliases.h), which compiled mode's runner reads: it passes a
    donated argument's buffer as the out-parameter, and the step updates
    its state in place.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

#endif // KILN_PASSES_HLOTOLINALG_PASSES_TD
