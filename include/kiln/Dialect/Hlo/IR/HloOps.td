//===- HloOps.td - hlo dialect ops -------------------------*- tablegen -*-===//
//
// Each op is one XLA HLO instruction. Verifiers check what XLA's shape
// inference would, so that a module that verifies here is one XLA accepts.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_HLO_OPS_TD
#define KILN_HLO_OPS_TD

include "kiln/Dialect/Hlo/IR/HloDialect.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Hlo_Tensor : RankedTensorOf<[F32, BF16, F16, I1, I32, I64, UI32]>;
def Hlo_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
def Hlo_IntTensor : RankedTensorOf<[I32, I64, UI32]>;
def Hlo_ScalarIndex : 0DTensorOf<[I32, I64, UI32]>;

// The one spelling of each op's XLA opcode: HLO export, the text printer,
// the statistics, the evaluator and the conformance rules all read it
// (OpTy::getOpcode(), or through the interface for any op).
def Hlo_OpcodeInterface : OpInterface<"OpcodeInterface"> {
  let description = "An hlo op: one XLA HLO instruction, named by its opcode.";
  let cppNamespace = "::kiln::hlo";
  let methods = [
    StaticInterfaceMethod<"The XLA HLO opcode (\"dynamic-slice\").", "::llvm::StringRef",
                          "getOpcode">
  ];
}

// `opcode`, XLA's name, is the mnemonic with dashes unless a def says
// otherwise.
class Hlo_OpcodeOf<string opcode> {
  code opcodeDeclaration = "static constexpr ::llvm::StringLiteral getOpcode() { return \""
                           # opcode # "\"; }";
}

class Hlo_Op<string mnemonic, list<Trait> traits = [], string opcode = !subst("_", "-", mnemonic)>
    : Op<Hlo_Dialect, mnemonic, !listconcat([Pure, Hlo_OpcodeInterface], traits)> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = Hlo_OpcodeOf<opcode>.opcodeDeclaration;
}

//===-- Leaves ------------------------------------------------------------===//

def Hlo_ConstantOp : Hlo_Op<"constant"> {
  let summary = "constant: a literal (splat or dense)";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Hlo_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Hlo_IotaOp : Hlo_Op<"iota"> {
  let summary = "iota: 0, 1, 2, ... along `iota_dimension`";
  let arguments = (ins I64Attr:$iota_dimension);
  let results = (outs Hlo_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Hlo_ReplicaIdOp : Hlo_Op<"replica_id"> {
  let summary = "replica-id: this rank's id (u32 scalar)";
  let results = (outs 0DTensorOf<[UI32]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===-- Elementwise -------------------------------------------------------===//

class Hlo_BinaryOp<string mnemonic, string xlaOpcode>
    : Hlo_Op<mnemonic, [SameOperandsAndResultType], xlaOpcode> {
  let summary = xlaOpcode # ": elementwise, operands and result of one type";
  let arguments = (ins Hlo_Tensor:$lhs, Hlo_Tensor:$rhs);
  let results = (outs Hlo_Tensor:$result);
}
def Hlo_AddOp : Hlo_BinaryOp<"add", "add">;
def Hlo_SubtractOp : Hlo_BinaryOp<"subtract", "subtract">;
def Hlo_MultiplyOp : Hlo_BinaryOp<"multiply", "multiply">;
def Hlo_DivideOp : Hlo_BinaryOp<"divide", "divide">;
def Hlo_MaximumOp : Hlo_BinaryOp<"maximum", "maximum">;
def Hlo_MinimumOp : Hlo_BinaryOp<"minimum", "minimum">;
def Hlo_PowerOp : Hlo_BinaryOp<"power", "power">;
def Hlo_AndOp : Hlo_BinaryOp<"and", "and">;

class Hlo_UnaryOp<string mnemonic, string xlaOpcode, Type type = Hlo_FloatTensor>
    : Hlo_Op<mnemonic, [SameOperandsAndResultType], xlaOpcode> {
  let summary = xlaOpcode # ": elementwise";
  let arguments = (ins type:$operand);
  let results = (outs type:$result);
}
def Hlo_ExpOp : Hlo_UnaryOp<"exp", "exponential">;
def Hlo_LogOp : Hlo_UnaryOp<"log", "log">;
def Hlo_RsqrtOp : Hlo_UnaryOp<"rsqrt", "rsqrt">;
def Hlo_SqrtOp : Hlo_UnaryOp<"sqrt", "sqrt">;
def Hlo_NegateOp : Hlo_UnaryOp<"negate", "negate", Hlo_Tensor>;
def Hlo_CosineOp : Hlo_UnaryOp<"cosine", "cosine">;
def Hlo_SineOp : Hlo_UnaryOp<"sine", "sine">;
def Hlo_SignOp : Hlo_UnaryOp<"sign", "sign">;

def Hlo_ConvertOp : Hlo_Op<"convert"> {
  let summary = "convert: elementwise change of element type";
  let arguments = (ins Hlo_Tensor:$operand);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

def Hlo_CompareOp : Hlo_Op<"compare"> {
  let summary = "compare: elementwise comparison to a predicate tensor";
  let arguments = (ins Hlo_Tensor:$lhs, Hlo_Tensor:$rhs,
                       Hlo_ComparisonDirectionAttr:$comparison_direction);
  let results = (outs RankedTensorOf<[I1]>:$result);
  let hasVerifier = 1;
}

def Hlo_SelectOp : Hlo_Op<"select"> {
  let summary = "select: pred ? on_true : on_false, elementwise";
  let arguments = (ins RankedTensorOf<[I1]>:$pred, Hlo_Tensor:$on_true, Hlo_Tensor:$on_false);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

//===-- Shapes ------------------------------------------------------------===//

def Hlo_BroadcastInDimOp : Hlo_Op<"broadcast_in_dim", [], "broadcast"> {
  let summary = "broadcast: operand dimension i becomes result dimension broadcast_dimensions[i]";
  let arguments = (ins Hlo_Tensor:$operand, DenseI64ArrayAttr:$broadcast_dimensions);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

def Hlo_ReshapeOp : Hlo_Op<"reshape"> {
  let summary = "reshape: row-major, same element count";
  let arguments = (ins Hlo_Tensor:$operand);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

def Hlo_TransposeOp : Hlo_Op<"transpose"> {
  let summary = "transpose: result dimension i is operand dimension permutation[i]";
  let arguments = (ins Hlo_Tensor:$operand, DenseI64ArrayAttr:$permutation);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

def Hlo_ConcatenateOp : Hlo_Op<"concatenate"> {
  let summary = "concatenate: operands joined along `dimension`";
  let arguments = (ins Variadic<Hlo_Tensor>:$inputs, I64Attr:$dimension);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

def Hlo_SliceOp : Hlo_Op<"slice"> {
  let summary = "slice: [start, limit) with strides on every dimension";
  let arguments = (ins Hlo_Tensor:$operand, DenseI64ArrayAttr:$start_indices,
                       DenseI64ArrayAttr:$limit_indices, DenseI64ArrayAttr:$strides);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

def Hlo_DynamicSliceOp : Hlo_Op<"dynamic_slice"> {
  let summary = "dynamic-slice: `slice_sizes` from scalar start indices, one per dimension";
  let arguments = (ins Hlo_Tensor:$operand, Variadic<Hlo_ScalarIndex>:$start_indices,
                       DenseI64ArrayAttr:$slice_sizes);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

def Hlo_PadOp : Hlo_Op<"pad"> {
  let summary = "pad: edge (low, high) and interior padding with a scalar value";
  let arguments = (ins Hlo_Tensor:$operand, Hlo_Tensor:$padding_value,
                       DenseI64ArrayAttr:$edge_padding_low,
                       DenseI64ArrayAttr:$edge_padding_high,
                       DenseI64ArrayAttr:$interior_padding);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

//===-- Contractions and reductions ---------------------------------------===//

def Hlo_DotGeneralOp : Hlo_Op<"dot_general", [], "dot"> {
  let summary = "dot: batch dims, then lhs free dims, then rhs free dims";
  let arguments = (ins Hlo_FloatTensor:$lhs, Hlo_FloatTensor:$rhs,
                       DenseI64ArrayAttr:$lhs_batching_dimensions,
                       DenseI64ArrayAttr:$rhs_batching_dimensions,
                       DenseI64ArrayAttr:$lhs_contracting_dimensions,
                       DenseI64ArrayAttr:$rhs_contracting_dimensions);
  let results = (outs Hlo_FloatTensor:$result);
  let hasVerifier = 1;
}

def Hlo_ReduceOp : Hlo_Op<"reduce"> {
  let summary = "reduce: `dimensions` folded away with `combiner` from `init`";
  let arguments = (ins Hlo_Tensor:$operand, Hlo_Tensor:$init,
                       DenseI64ArrayAttr:$dimensions, Hlo_CombinerAttr:$combiner);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

//===-- Indexing ----------------------------------------------------------===//

def Hlo_GatherOp : Hlo_Op<"gather"> {
  let summary = "gather: slices of `operand` at `start_indices` (XLA's dimension numbers)";
  let arguments = (ins Hlo_Tensor:$operand, Hlo_IntTensor:$start_indices,
                       DenseI64ArrayAttr:$offset_dims,
                       DenseI64ArrayAttr:$collapsed_slice_dims,
                       DenseI64ArrayAttr:$start_index_map, I64Attr:$index_vector_dim,
                       DenseI64ArrayAttr:$slice_sizes);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

def Hlo_ScatterOp : Hlo_Op<"scatter"> {
  let summary = "scatter: `updates` combined into `operand` at `scatter_indices`";
  let arguments = (ins Hlo_Tensor:$operand, Hlo_IntTensor:$scatter_indices,
                       Hlo_Tensor:$updates, DenseI64ArrayAttr:$update_window_dims,
                       DenseI64ArrayAttr:$inserted_window_dims,
                       DenseI64ArrayAttr:$scatter_dims_to_operand_dims,
                       I64Attr:$index_vector_dim, Hlo_CombinerAttr:$combiner);
  let results = (outs Hlo_Tensor:$result);
  let hasVerifier = 1;
}

//===-- Collectives --------------------------------------------------------===//
//
// replica_groups `[groups, group_size]` and, as in XLA, an optional
// channel_id: without one the groups are replica ids (cross-replica, the
// model Kiln emits and neuronx-cc's proven emitters use); with one and
// use_global_device_ids, flattened global ids; with one alone,
// cross-partition. The hlo dialect mirrors XLA, so it holds every form; the
// Neuron conformance check (NeuronConformance.h) accepts only the first.

class Hlo_CollectiveOp<string mnemonic> : Hlo_Op<mnemonic> {
  dag commonArgs = (ins I64ElementsAttr:$replica_groups, OptionalAttr<I64Attr>:$channel_id,
                        UnitAttr:$use_global_device_ids);
  let hasVerifier = 1;
}

def Hlo_AllGatherOp : Hlo_CollectiveOp<"all_gather"> {
  let summary = "all-gather: the group's operands concatenated along `all_gather_dim`";
  let arguments = !con((ins Hlo_Tensor:$operand, I64Attr:$all_gather_dim), commonArgs);
  let results = (outs Hlo_Tensor:$result);
}

def Hlo_ReduceScatterOp : Hlo_CollectiveOp<"reduce_scatter"> {
  let summary = "reduce-scatter: the group's reduction, block i to member i along `scatter_dimension`";
  let arguments = !con((ins Hlo_Tensor:$operand, I64Attr:$scatter_dimension,
                            Hlo_CombinerAttr:$combiner), commonArgs);
  let results = (outs Hlo_Tensor:$result);
}

def Hlo_AllReduceOp : Hlo_CollectiveOp<"all_reduce"> {
  let summary = "all-reduce: the group's reduction on every member";
  let arguments = !con((ins Hlo_Tensor:$operand, Hlo_CombinerAttr:$combiner), commonArgs);
  let results = (outs Hlo_Tensor:$result);
}

def Hlo_AllToAllOp : Hlo_CollectiveOp<"all_to_all"> {
  let summary = "all-to-all: block i of `split_dimension` to member i, received blocks in member order";
  let description = [{
    XLA's array form (`dimensions={split_dimension}`): the operand splits
    into one block per member along the dimension, and the blocks received
    are concatenated along the same dimension, so the shape is unchanged.
    XLA has no use_global_device_ids on all-to-all: with a channel_id its
    groups are partition ids, without one replica ids.
  }];
  let arguments = !con((ins Hlo_Tensor:$operand, I64Attr:$split_dimension), commonArgs);
  let results = (outs Hlo_Tensor:$result);
}

//===-- Custom calls -------------------------------------------------------===//

def Hlo_CustomCallOp : Hlo_Op<"custom_call"> {
  let summary = "custom-call: an external kernel (NKI kernels on Neuron)";
  let description = [{
    Several results become one tuple-shaped custom-call and a
    get-tuple-element per result in XLA. `output_operand_aliases` pairs
    result i with operand aliases[i] (-1: none) where the kernel writes in
    place.
  }];
  let arguments = (ins Variadic<Hlo_Tensor>:$inputs, StrAttr:$call_target_name,
                       StrAttr:$backend_config,
                       OptionalAttr<DenseI64ArrayAttr>:$output_operand_aliases);
  let results = (outs Variadic<Hlo_Tensor>:$results);
  let hasVerifier = 1;
}

//===-- Scheduling ---------------------------------------------------------===//

// Not an Hlo_Op: without Pure (no memory-effect interface at all) MLIR's CSE
// and DCE leave it alone, as XLA's passes leave an opt-barrier.
def Hlo_OptBarrierOp : Op<Hlo_Dialect, "opt_barrier", [Hlo_OpcodeInterface]> {
  let summary = "opt-barrier: its operands, which XLA may not look through";
  let description = [{
    In XLA one `opt-barrier` instruction takes the tuple of the operands and
    returns it, each result then read by a get-tuple-element. XLA's passes
    see the results as new values: a computation on them is not merged (CSE)
    with the same computation on the operands, and cannot run before every
    operand is ready. Activation checkpointing relies on both (torch_xla's
    `optimization_barrier_`).
  }];
  let arguments = (ins Variadic<Hlo_Tensor>:$inputs);
  let results = (outs Variadic<Hlo_Tensor>:$results);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = Hlo_OpcodeOf<"opt-barrier">.opcodeDeclaration;
}

#endif // KILN_HLO_OPS_TD
