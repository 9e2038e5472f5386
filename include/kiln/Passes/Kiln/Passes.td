//===- Passes.td - The kiln dialect's transforms -----------------*- tablegen -*-===//

#ifndef KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD
#define KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def SubstituteKernels : Pass<"kiln-substitute-kernels", "mlir::ModuleOp"> {
  let summary = "Replace ops by registered kernels as override rules say";
  let description = [{
    torchtitan's override registry at compile time. Each rule (see
    kiln/Config/OverrideRules.h) selects the ops named `target` whose `fqn` matches
    one of its `fqns` globs (Python fnmatch, anchored; none: every
    instance) and replaces each by a `kiln.kernel` of its `kernel`, with
    transposes into and out of the kernel's layout. Runs on the forward
    functions, before kiln-autodiff, so each kernel's VJP brings its own
    backward. Prints `[Override] <rule>: <fqn> <op> -> <kernel>` per replaced
    node and a total; warns about rules that matched nothing. Fails, naming
    the rule, for an unknown kernel, a kernel of another op, a bad glob, two
    rules claiming one node, a node whose form an `exact` rule's kernel does
    not implement (non-exact rules leave it, with a note) and a violated
    kernel constraint on the target machine.
  }];
  let options = [
    ListOption<"ruleFiles", "rules", "std::string",
               "JSON rule files (a list of rules, or {\"rules\": [...]})">,
    Option<"targetName", "target", "::kiln::TargetName", "::kiln::TargetName::Trn2",
           "The machine kernel constraints are checked against: trn2, trn1 or cpu">,
    Option<"lnc", "lnc", "int64_t", "2", "Logical NeuronCore config of the target">,
    Option<"log", "log", "bool", "true",
           "Print the [Override] lines and warnings (off on all ranks but one)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def MixedPrecision : Pass<"kiln-mixed-precision", "mlir::ModuleOp"> {
  let summary = "bf16 parameters and matmul operands as torchtitan's FSDP2 mixed precision";
  let description = [{
    With `param` = bfloat16, rounds `func @<func>` (the loss, before
    kiln-autodiff) to torchtitan's mixed precision with `kiln.cast`: every
    float parameter where it enters (FSDP2's MixedPrecisionPolicy casts the
    gathered parameters to param_dtype), and the activation operand and the
    result of every `kiln.linear` (bf16 matmul inputs and outputs), and the
    queries and keys of every `kiln.attention` after rope (SDPA's bf16
    operands; its values are a linear's cast result already); the rest
    computes in float32 on those values. Each value is cast once, whatever
    its number of uses. Differentiation then rounds the cotangent of each
    cast value (bf16 gradients), while the master weights, AdamW's state and
    the gradient reductions stay float32 (`reduce` = float32, the only
    reduce dtype torchtitan accepts). `param` = float32 leaves the module
    unchanged.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"loss\"", "The loss function to cast">,
    Option<"param", "param", "::kiln::PrecisionDtype", "::kiln::PrecisionDtype::Float32",
           "training.mixed_precision_param: bfloat16 or float32">,
    Option<"reduce", "reduce", "::kiln::PrecisionDtype", "::kiln::PrecisionDtype::Float32",
           "training.mixed_precision_reduce: float32 (bfloat16 is refused, as torchtitan does)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::func::FuncDialect"];
}

def PipelineSplit : Pass<"kiln-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Split the loss into pipeline stages at module boundaries";
  let description = [{
    Pipeline parallelism's cut, before kiln-autodiff: `func @<func>` gains
    `func @<func>_stage<s>` (`kiln.stage = s`) for each stage, where
    `stage-starts` names the first module of every stage after the first
    (torchtitan's fqns, "layers.4" or "norm", in model order; the driver
    takes them from the resolved stages, docs/parallelism.md). A module
    belongs to the stage in which it first appears, and an op to its
    `fqn`'s module ("layers.4" of "layers.4.attention.wq"). An op of
    parameters alone (the rope cache, a parameter's cast) is cloned into
    every stage that uses it, so a tied table's cast serves both its stages.
    Each stage takes the values earlier stages computed for it, then the
    data inputs and parameters it uses (a tied table: both its stages); it
    returns the values later stages use, each such argument or result
    tagged `kiln.transfer = N` (values numbered in @<func>'s order; a value
    a later stage uses passes through the stages between). The last stage
    returns @<func>'s results. @<func> itself is kept. Fails naming the
    module for a start that is not a module of @<func> (or is out of order)
    and for an op that uses a later stage's value.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"loss\"", "The function to split">,
    ListOption<"stageStarts", "stage-starts", "std::string",
               "The first module of each stage after the first, in model order">,
  ];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::func::FuncDialect"];
}

def Autodiff : Pass<"kiln-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of a loss into parameter gradients";
  let description = [{
    Clones `func @<func>` (a scalar loss of tokens and parameters) into
    `func @<grad-func>` returning `(loss, d loss / d param...)`, one gradient
    per argument tagged `kiln.param`, in argument order, each result tagged
    `kiln.grad = "<HF key>"`, the loss tagged `kiln.output = "loss"`. Ops
    are visited in reverse; each op's
    VjpOpInterface emits its backward, and cotangents of values used more than
    once (tied embeddings, residual streams) are summed with kiln.add, named
    `<module>.grad_accum` after the module the value belongs to.
    Forward ops whose results the backward reads are marked
    `kiln.saved = array<i64: result indices>`: the saved activations.

    With `pipeline-stages`, differentiates instead each stage of
    kiln-pipeline-split (`kiln.stage`) into `@<stage>_grad` (also tagged
    `kiln.stage`): the last from its loss, as above; every other from the
    cotangents of the transfers it sends (`kiln.cotangent = N` arguments).
    It returns the stage's results, then its parameters' gradients, then
    the cotangent of each float transfer the stage received
    (`kiln.cotangent = N`, zeros where none flows), which the previous stage
    takes. A tied parameter gets a gradient from each of its stages; their
    sum is the parameter's. kiln-stage-forward-backward then cuts each in
    two (kiln-activation-checkpoint may run between).
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"loss\"",
           "The loss function to differentiate">,
    Option<"pipelineStages", "pipeline-stages", "bool", "false",
           "Differentiate the pipeline stage functions (kiln.stage) instead">,
    Option<"gradFuncName", "grad-func", "std::string", "\"loss_grad\"",
           "Name of the function to create">,
  ];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::func::FuncDialect"];
}

def ActivationCheckpoint : Pass<"kiln-activation-checkpoint", "mlir::ModuleOp"> {
  let summary = "Recompute checkpointed layers in the backward instead of saving them";
  let description = [{
    torchtitan's `[activation_checkpoint]` on the function kiln-autodiff
    built. A layer is the ops whose fqn is `layers.<N>.*`. In a checkpointed
    layer, every forward value the backward reads is recomputed: its ops
    (and the layer's ops they depend on) are cloned, tagged
    `kiln.recomputed`, just before the first backward op that reads one of
    them, and the backward reads the copies. What a layer's ops take from
    outside it (the layer's input, parameters, the RoPE table) and what
    forward ops outside it read from it (its output) stay saved, as do the
    routers' results (their expert choice is the step's). `kiln.saved` is
    then set again from the rewritten function.

    `mode` = none, selective or full. full checkpoints every layer: only the
    layer's input is saved. selective with `selective-option` = N (a
    positive integer) checkpoints layers N-1, 2N-1, ... (torchtitan's every
    N-th block); with `op`, every layer saves the results of its matmuls
    (linear, attention, grouped experts, and kernels replacing them) and
    recomputes the rest (norms, RoPE, activations, residual adds).
    Runs before kiln-optimizer (so @train_step inherits it) and before
    kiln-shard, and refuses a function holding optimizer state or shard
    collectives; the forward is the part of the function computing its
    kiln.output results (loss and metrics) and kiln.transfer results (what
    a pipeline stage sends), the rest is the backward. With
    `pipeline-stages`, every differentiated pipeline stage (the
    `@<stage>_grad` functions kiln-autodiff pipeline-stages makes) is
    checkpointed instead of @<func>, before kiln-stage-forward-backward: a
    checkpointed layer's forward then keeps only its input for its backward.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"loss_grad\"",
           "The function kiln-autodiff made">,
    Option<"pipelineStages", "pipeline-stages", "bool", "false",
           "Checkpoint every differentiated pipeline stage instead of @<func>">,
    Option<"mode", "mode", "::kiln::CheckpointMode", "::kiln::CheckpointMode::None",
           "none, selective or full">,
    Option<"selectiveOption", "selective-option", "std::string", "\"2\"",
           "With mode=selective: op, or N to checkpoint every N-th layer">,
  ];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::func::FuncDialect"];
}

def StageForwardBackward : Pass<"kiln-stage-forward-backward", "mlir::ModuleOp"> {
  let summary = "Cut each differentiated pipeline stage into its forward and backward";
  let description = [{
    A schedule runs a microbatch's forward long before its backward, so
    each `@<stage>_grad` of kiln-autodiff pipeline-stages (a `kiln.stage`
    function) is replaced by two functions. Its forward is the ops
    computing its own results (the `kiln.transfer` it sends, or the loss
    and metrics), not those kiln-activation-checkpoint recomputes.
    `@<stage>_forward` returns those results, then the activations the
    backward reads (`kiln.residual = i`); `@<stage>_backward` takes those
    residuals, the arguments it reads and the cotangents, and returns the
    gradients and the cotangents of what the stage received. A forward op
    of parameters alone that the backward reads (a weight's cast) is
    recomputed there rather than kept per microbatch. Fails naming the
    function when a `@<stage>_grad` has no such results first.
  }];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::func::FuncDialect"];
}

def Optimizer : Pass<"kiln-optimizer", "mlir::ModuleOp"> {
  let summary = "AdamW with gradient clipping and an LR schedule: builds @train_step";
  let description = [{
    From `func @<grad-func>(tokens, params...) -> (loss, grads...)` builds
    `func @<train-func>(params..., step, exp_avg..., exp_avg_sq..., tokens)
     -> (params..., step, exp_avg..., exp_avg_sq..., loss, grad_norm)`:
    the total gradient norm (reported before clipping), the clipping
    coefficient min(1, max_norm / (norm + 1e-6)), the learning rate of update
    `step` and one kiln.adamw per parameter. State arguments and results are
    tagged `kiln.state` ("step", "exp_avg.<key>", "exp_avg_sq.<key>"),
    updated parameters `kiln.param`, and the two outputs `kiln.output`
    ("loss", "grad_norm"). Arguments are found by these attributes
    (kiln::Signature), never by position; every data input of @<grad-func>
    is carried over. Each kiln.adamw is named after the module that owns its
    parameter (its first user), e.g. `layers.0.attention.wq`.

    With `load-balance-coeff` > 0, torchtitan's aux-loss-free load
    balancing: each kiln.router gets an expert bias, a state argument and
    result `expert_bias.<router fqn>` (zeros at the start), that steers its
    selection, and kiln.expert_bias_update moves it by the step's load.
    Only @<train-func> routes with the bias; @loss stays Hugging Face's.

    With `microbatches` N > 1, gradient accumulation: @<train-func> takes N
    copies of every data input (the k-th tagged `kiln.microbatch = k`),
    runs @<grad-func>'s body on each in turn and sums the gradients as it
    goes, then takes one optimizer step. The loss, the metrics and the
    gradient are the means over the N microbatches (every microbatch has as
    many positions, so this is the mean over every position of the step);
    the 1/N is applied to scalars only: the loss and metrics, the norm,
    and the coefficient kiln.adamw multiplies the gradient by. Ops run in
    microbatch order, so only one microbatch's activations are live at once.

    With `pipeline-degree` P > 1, the update of pipeline rank
    `pipeline-rank` r, where stage s runs on rank s mod P (the looped
    placement of GPipe, 1F1B and Interleaved1F1B): over the parameters of
    r's stages (the `kiln.grad` results of the `kiln.stage` functions named
    `..._backward` that kiln-autodiff pipeline-stages makes, in stage order,
    each once) it builds `@<train-func>(params..., step, exp_avg...,
    exp_avg_sq..., grads...) -> (params..., step, exp_avg..., exp_avg_sq...,
    grad_norm)`. The gradients are arguments tagged `kiln.grad`, each the sum
    over the step's `microbatches` of its microbatch's mean-loss gradient and
    over every rank whose stages use the parameter (the runtime runs the
    schedule and sums a tied table's gradient between its first and last
    stages' ranks), so the 1/N is applied as above. The norm is over every
    stage: each rank squares the gradients of the parameters whose first
    stage it runs and the sums are all-reduced over the grid axis `pp` (a
    grid [P] with that one axis is made when the module has none) and, for
    stages partitioned with their gradients stored split (FSDP, TP inside a
    stage: kiln.sharding on the backwards' kiln.grad results), over the
    axes they are split on: gradients split alike share one sum and one
    all-reduce, every rank making one for each way any stage's gradients
    are split (a sum of 0 where it has none). With
    `data-parallel-axes`, replicas of the pipeline on those grid axes
    (dp_replicate) train on their own rows: each gradient is first summed
    over them by an all-reduce, and `microbatches` counts every replica's. The loss
    is the last stage's output, not the update's.
  }];
  let options = [
    Option<"gradFuncName", "grad-func", "std::string", "\"loss_grad\"",
           "The function made by kiln-autodiff">,
    Option<"trainFuncName", "train-func", "std::string", "\"train_step\"",
           "Name of the function to create">,
    Option<"lr", "lr", "double", "8e-4", "Peak learning rate">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.95", "AdamW beta2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.1", "Decoupled weight decay">,
    Option<"maxNorm", "max-norm", "double", "1.0", "Gradient clipping threshold">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0", "Linear warmup updates">,
    Option<"stableSteps", "stable-steps", "int64_t", "1000000000",
           "Constant-rate updates after warmup">,
    Option<"decaySteps", "decay-steps", "int64_t", "0", "Decay updates after stable">,
    Option<"decayType", "decay-type", "::kiln::DecayType", "::kiln::DecayType::Linear",
           "linear, sqrt or cosine">,
    Option<"minLrFactor", "min-lr-factor", "double", "0.0",
           "Rate at the end of decay, as a fraction of lr">,
    Option<"loadBalanceCoeff", "load-balance-coeff", "double", "0.0",
           "Expert-bias step of aux-loss-free MoE load balancing (0: off)">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "Microbatches whose gradients one update accumulates">,
    Option<"pipelineDegree", "pipeline-degree", "int64_t", "1",
           "pipeline_parallel_degree: > 1 builds one pipeline rank's update">,
    Option<"pipelineRank", "pipeline-rank", "int64_t", "0",
           "With pipeline-degree > 1: the pipeline rank whose update to build">,
    ListOption<"dataParallelAxes", "data-parallel-axes", "int64_t",
               "With pipeline-degree > 1: grid axes of the pipeline's replicas">,
  ];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::func::FuncDialect",
                           "::mlir::shard::ShardDialect"];
}

def ExpertDispatch : Pass<"kiln-expert-dispatch", "mlir::ModuleOp"> {
  let summary = "All-to-all token dispatch: each grouped_experts through a capacity buffer";
  let description = [{
    Rewrites every `kiln.grouped_experts` (before kiln-autodiff) into
    `kiln.expert_dispatch` (the routed pairs into a buffer of `groups`
    expert blocks, `capacity` rows per block for each of `chunks` token
    chunks), the experts over that buffer (`blocked`, every row weighted by
    its pair's routing weight) and `kiln.expert_combine` (each token's rows
    summed back). Under expert parallelism `groups` is the ep degree and
    `chunks` the data-parallel degree: kiln-partition then exchanges the
    buffer between each expert group's ranks with one all-to-all before the
    experts and one after. The capacity per chunk and block is
    `ceil(capacity-factor * tokens/chunks * k / groups)`; capacity-factor 0
    takes the smallest capacity that drops no pair (tokens/chunks * min(k,
    experts/groups)). A kernel call in the experts' place is an error.
  }];
  let options = [
    Option<"groups", "groups", "int64_t", "1", "expert blocks (expert_parallel_degree)">,
    Option<"chunks", "chunks", "int64_t", "1",
           "token chunks: the data-parallel degree, the rows of the batch split over it">,
    Option<"capacityFactor", "capacity-factor", "double", "0",
           "parallelism.expert_capacity_factor (0: drop nothing)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::func::FuncDialect"];
}

def Shard : Pass<"kiln-shard", "mlir::ModuleOp"> {
  let summary = "Decide the sharding of every value of @train_step for a parallel layout";
  let description = [{
    Adds `shard.grid @grid` of shape [dp-replicate, dp-shard, tp] with
    `kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]` (with ep > 1:
    [dp-replicate, dp-shard / ep, ep, tp], axes
    ["dp_replicate", "dp_shard", "ep", "tp"]; with cp > 1 an axis "cp"
    before "tp") and annotates
    @<func>: `kiln.sharding` on every argument and result (how it is stored),
    and on every op `kiln.loops` (the grid axes of each loop of its
    ShardingRule) and `kiln.shardings` (what its consumers see). FSDP2 over
    dp-shard, replication over dp-replicate and tensor parallelism over tp
    by the styles of `tp-plan`, expert parallelism over ep (the stacked
    experts split over ep, their tokens gathered over it); see Shard.cpp.
    A pipeline stage's `@loss_stage<s>_grad` shards the same way: its
    kiln.transfer and kiln.cotangent arguments and results split on their
    batch dimension as data inputs are (and with sequence-parallel a
    [batch, seq, hidden] one on its sequence over tp, as the stages hold
    the residual stream), its kiln.grad results stored as their parameters
    (reduce-scattered). A parameter several stages read (a tied table) is
    split in all of them as the first places it.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"train_step\"", "The training step">,
    Option<"dpReplicate", "dp-replicate", "int64_t", "1", "data_parallel_replicate_degree">,
    Option<"dpShard", "dp-shard", "int64_t", "1", "data_parallel_shard_degree (resolved)">,
    Option<"tp", "tp", "int64_t", "1", "tensor_parallel_degree">,
    Option<"ep", "ep", "int64_t", "1",
           "expert_parallel_degree: ranks of dp-shard the experts are split over">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "enable_sequence_parallel (when tp > 1)">,
    Option<"cp", "cp", "int64_t", "1",
           "context_parallel_degree: a grid axis 'cp' (before tp) the sequence of the data "
           "inputs and of the residual stream splits over; attention gathers keys and values "
           "over it; parameters are FSDP-sharded over dp_shard and cp">,
    Option<"cpHeadTail", "cp-head-tail", "bool", "true",
           "context_parallel_load_balancer = headtail (with cp > 1): the sequence laid out in "
           "2 x cp chunks so that each cp rank holds a head and a tail chunk (module attribute "
           "kiln.head_tail_chunks; attention and rope_cache read positions through it)">,
    Option<"pp", "pp", "int64_t", "1",
           "pipeline_parallel_degree: a leading grid axis 'pp' that no op of a stage uses "
           "(each pipeline rank's collectives stay among its own ranks; kiln-optimizer's "
           "pipeline update reduces over it)">,
    Option<"stages", "stages", "bool", "false",
           "Shard every pipeline stage's forward-and-backward (kiln.stage, @..._grad) "
           "instead of @<func>">,
    ListOption<"tpPlan", "tp-plan", "std::string",
               "Tensor-parallel styles by module glob: 'layers.*.attention.wq=colwise' "
               "(colwise: weight dim 0 over tp, rowwise: dim 1); other parameters are "
               "replicated over tp">,
  ];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::shard::ShardDialect"];
}

def Partition : Pass<"kiln-partition", "mlir::ModuleOp"> {
  let summary = "Rewrite an annotated @train_step into the per-rank program";
  let description = [{
    Replaces @<func> by the program every rank runs: local shapes from the
    kiln.sharding of its arguments, each op cloned on local operands, and
    explicit `shard` collectives on the grid's named axes wherever a value's
    sharding differs from what its consumer needs (all_gather, all_slice,
    reduce_scatter of partial sums into shards, all_reduce of the rest).
    Parameters are all-gathered at each use (reshard-after-forward
    "default" or "always") or once for all uses ("never"). The annotations
    are consumed: running it twice, or before kiln-shard, is an error.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"train_step\"", "The training step">,
    Option<"stages", "stages", "bool", "false",
           "Partition every pipeline stage's forward-and-backward (kiln.stage, @..._grad) "
           "instead of @<func>">,
    Option<"reshardAfterForward", "reshard-after-forward", "::kiln::ReshardAfterForward",
           "::kiln::ReshardAfterForward::Default",
           "default, always or never (torchtitan's fsdp_reshard_after_forward)">,
  ];
  let dependentDialects = ["::kiln::KilnDialect", "::mlir::shard::ShardDialect"];
}

#endif // KILN_DIALECT_KILN_TRANSFORMS_PASSES_TD
