//===- Passes.td - kiln to hlo -----------------------------------*- tablegen -*-===//

#ifndef KILN_CONVERSION_KILNTOHLO_PASSES_TD
#define KILN_CONVERSION_KILNTOHLO_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToHlo : Pass<"kiln-lower-to-hlo", "mlir::ModuleOp"> {
  let summary = "Lower a per-rank training step to the hlo dialect (XLA HLO)";
  let description = [{
    The Neuron backend's lowering: every kiln op of `func` (forward, backward,
    loss, optimizer, mixture of experts with the experts dense; see
    lib/Runtime for the math each reproduces), the
    upstream `shard` collectives (all_gather, reduce_scatter, all_reduce,
    all_to_all in its array form, cross-replica: explicit replica groups of
    global ranks from the grid axes, row-major with the last axis fastest,
    no channel id; all_slice as a dynamic-slice at this rank's index) and
    kernel calls (`kiln.kernel`,
    `kiln.kernel_backward`: custom calls to AwsNeuronCustomNativeKernel whose
    backend_config names the NKI kernel) become hlo ops. Other functions and
    the grid op are removed; the module gains `hlo.replica_count` (the world
    size) and `hlo.distinct_replica_groups`. The function gains a last
    argument, `kiln.rank = "rank"` (s32 scalar): each rank is fed its global
    id there, and every per-rank index (TP, SP, vocabulary and expert
    blocks) is read from a constant table at it, so one program serves
    every rank without replica-id. An op without a lowering is an
    error naming it and its fqn. Token ids stay int64 parameters
    (kiln-hlo-narrow-int64 makes them s32) and are converted to int32 where
    they index. Each checkpointed layer's
    recomputation (`kiln.recomputed` ops) reads what it takes from before it
    through one `hlo.opt_barrier` that also holds the cotangent its backward
    starts from, so XLA neither merges it with the forward nor hoists it.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"train_step\"",
           "The per-rank function to lower (the HLO entry computation)">,
    Option<"cpuKernels", "cpu-kernels", "bool", "false",
           "Compiled mode for the CPU: a kernel without a Neuron custom call (CPU "
           "only) becomes a custom call to KilnCpuKernel, whose CPU implementation "
           "compiled mode runs; without it such a kernel is an error">,
  ];
  let dependentDialects = ["::kiln::hlo::HloDialect", "::mlir::func::FuncDialect"];
}

#endif // KILN_CONVERSION_KILNTOHLO_PASSES_TD
