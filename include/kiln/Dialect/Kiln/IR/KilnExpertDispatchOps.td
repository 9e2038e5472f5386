//===- KilnExpertDispatchOps.td - The all-to-all token dispatcher -*- tablegen -*-===//
//
// Expert parallelism's all-to-all token dispatcher (GShard's, with a
// capacity): kiln-expert-dispatch rewrites each kiln.grouped_experts into
// kiln.expert_dispatch (the routed pairs placed into a fixed-size buffer per
// expert block), the experts over the buffer's rows (`blocked`), and
// kiln.expert_combine (each token's rows summed back). The buffer's block
// dimension and its token-chunk dimension are what kiln-partition exchanges
// with one shard.all_to_all each way: every rank sends each expert block the
// rows of its own tokens routed there. Included from KilnOps.td.
//
//===----------------------------------------------------------------------===//

def Kiln_ExpertDispatchOp : Kiln_Op<"expert_dispatch", [
    DeclareOpInterfaceMethods<Kiln_VjpOpInterface>], ["localize"]> {
  let summary = "Routed (token, expert) pairs into a buffer of `capacity` rows per block and chunk";
  let description = [{
    x `[B, ..., H]`, the routing `weights` (f32) and `experts` (ids)
    `[B, ..., k]`. The `num_experts` experts form `groups` contiguous blocks;
    the tokens (in order) form `chunks` equal chunks of whole rows of B (the
    data-parallel ranks' batches). Within each chunk the pairs are taken
    first choices first (slot-major, as GShard gives top-1 priority), and the
    c-th pair of chunk s routed to block g fills row `s * capacity + c` of
    block g while `c < capacity`; later pairs are dropped (their token
    skips that expert, as in GShard and Switch).

    Results: `rows [groups, chunks * capacity, H]` (x's row of the pair, 0 in
    unfilled rows), `row_weights [groups, chunks * capacity, 1]` (its routing
    weight, 0 unfilled), `row_experts [groups, chunks * capacity, 1]` (i64:
    its expert, -1 unfilled) and `slots [B, ..., k]` (i64: the pair's row
    within its chunk's part of the buffer, `g * capacity + c`, or -1 when
    dropped). Slots are relative to the chunk, so a rank holding some chunks
    reads the same slots as the whole buffer. A capacity of
    `tokens / chunks * min(k, num_experts / groups)` drops nothing.

    Example:

    ```mlir
    %rows, %rw, %re, %slots = kiln.expert_dispatch %x, %w, %ids
        {groups = 2 : i64, chunks = 2 : i64, capacity = 512 : i64, num_experts = 64 : i64,
         fqn = "layers.0.moe.experts"}
        : (tensor<4x128x2048xf32>, tensor<4x128x4xf32>, tensor<4x128x4xi64>)
        -> (tensor<2x1024x2048xf32>, tensor<2x1024x1xf32>, tensor<2x1024x1xi64>,
            tensor<4x128x4xi64>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_F32Tensor:$weights, Kiln_IdTensor:$experts,
                       I64Attr:$groups, I64Attr:$chunks, I64Attr:$capacity,
                       I64Attr:$num_experts, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$rows, Kiln_F32Tensor:$row_weights,
                      RankedTensorOf<[I64]>:$row_experts, RankedTensorOf<[I64]>:$slots);
}

def Kiln_ExpertCombineOp : Kiln_Op<"expert_combine", [
    DeclareOpInterfaceMethods<Kiln_VjpOpInterface>], ["localize"]> {
  let summary = "Each token's expert rows, back from the dispatch buffer and summed";
  let description = [{
    `result[t] = sum over t's slots j (ascending, dropped ones skipped) of
    rows[g, s * capacity + c]` for `slots[t, j] = g * capacity + c`, with s
    the chunk of token t (of `chunks`); rows `[groups, chunks * capacity, H]`
    as kiln.expert_dispatch lays them out, already weighted. The slots come
    first so that the tokens' split decides the op's.

    Example:

    ```mlir
    %y = kiln.expert_combine %slots, %out {chunks = 2 : i64, fqn = "layers.0.moe.experts"}
        : (tensor<4x128x4xi64>, tensor<2x1024x2048xf32>) -> tensor<4x128x2048xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I64]>:$slots, Kiln_FloatTensor:$rows, I64Attr:$chunks,
                       StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_ExpertDispatchBackwardOp : Kiln_BackwardOp<"expert_dispatch_backward",
                                                    ["getRowsGrad", "getRowWeightsGrad"], [],
                                                    ["localize"]> {
  let summary = "Gradients of expert_dispatch: each token's rows summed, each pair's weight";
  let description = [{
    `input_grad[t] = sum over t's kept slots of rows_grad[row]` and
    `weights_grad[t, j] = row_weights_grad[row]` (0 when dropped).

    Example:

    ```mlir
    %dx, %dw = kiln.expert_dispatch_backward %slots, %drows, %drw
        {chunks = 2 : i64, fqn = "layers.0.moe.experts"}
        : (tensor<4x128x4xi64>, tensor<2x1024x2048xf32>, tensor<2x1024x1xf32>)
        -> (tensor<4x128x2048xf32>, tensor<4x128x4xf32>)
    ```
  }];
  let arguments = (ins RankedTensorOf<[I64]>:$slots, Kiln_FloatTensor:$rows_grad,
                       Kiln_F32Tensor:$row_weights_grad, I64Attr:$chunks, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$input_grad, Kiln_F32Tensor:$weights_grad);
}

def Kiln_ExpertCombineBackwardOp : Kiln_BackwardOp<"expert_combine_backward",
                                                   ["getResultGrad"], [], ["localize"]> {
  let summary = "Gradient of expert_combine: each kept pair's row gets its token's gradient";
  let description = [{
    `rows_grad [groups, chunks * capacity, H]`, unfilled rows 0.

    Example:

    ```mlir
    %drows = kiln.expert_combine_backward %dy, %slots
        {groups = 2 : i64, chunks = 2 : i64, capacity = 512 : i64, fqn = "layers.0.moe.experts"}
        : (tensor<4x128x2048xf32>, tensor<4x128x4xi64>) -> tensor<2x1024x2048xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$result_grad, RankedTensorOf<[I64]>:$slots,
                       I64Attr:$groups, I64Attr:$chunks, I64Attr:$capacity, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$rows_grad);
}
