//===- NkiGroupedExperts.cpp - nki_grouped_experts for kiln.grouped_experts ===//
//
// The seeds' grouped-experts kernel for a MoE layer's routed SwiGLU experts,
// in Kiln's own layout (x [..., hidden], routing weights and ids [..., k],
// stacked expert weights): tokens grouped by expert, one GEMM chain per
// expert, no capacity limit. The matmuls tile hidden and the intermediate
// size over the 128 partitions of a core.
//
// Under expert parallelism a call holds its rank's block of the stacks:
// kiln-partition records `expert_axes` and `num_experts` in its options, and
// the backends pass the block's first expert as a last i32 scalar operand
// (KernelSpec::gridBlock); pairs routed to other blocks contribute nothing.
// Behind the all-to-all dispatcher (option `blocked`) a call takes the
// rank's buffer, one expert per row, and splits as the blocked op does.
//
//===----------------------------------------------------------------------===//

#include "KernelBase.h"

#include "kiln/Runtime/MoeKernels.h"
#include "kiln/Support/Error.h"

#include <fmt/core.h>

namespace kiln::kernel_ir {
namespace {

/// The rows of a block of moe_cte's blockwise form: shard_on_i takes
/// multiples of 256; the least pads the fewest rows.
constexpr int64_t kBlockSize = 256;

/// The experts of the whole layer a call's stacks are a block of, from its
/// options (kiln-partition's `num_experts`); 0 when they are every expert.
int64_t numExperts(Operation *op) {
  auto options = op->getAttrOfType<DictionaryAttr>("options");
  auto total = options ? options.getAs<IntegerAttr>("num_experts") : nullptr;
  return total ? total.getInt() : 0;
}

/// A call in place of a blocked kiln.grouped_experts (the all-to-all
/// dispatcher's buffer, option `blocked`): its rows are its own, one expert
/// each.
bool isBlocked(Operation *op) {
  auto options = op->getAttrOfType<DictionaryAttr>("options");
  auto flag = options ? options.getAs<BoolAttr>("blocked") : nullptr;
  return flag && flag.getValue();
}

/// A call's operands are grouped_experts' (x, weights, ids, w1, w3, w2),
/// after the output's cotangent in the backward.
unsigned inputOperand(bool backward) { return backward ? 1 : 0; }
unsigned w1Operand(Operation *call) { return inputOperand(!isa<KernelOp>(call)) + 3; }

/// The shard a CPU call runs: the block's first expert is the operand past
/// the op's own `count` (see gridBlock).
kernels::ExpertShard expertShard(DictionaryAttr options, MutableArrayRef<Tensor> in,
                                 size_t count) {
  auto total = options.getAs<IntegerAttr>("num_experts");
  if (!total)
    return {};
  if (in.size() != count + 1 || in[count].dtype() != DType::I32 || in[count].numel() != 1)
    fail("nki_grouped_experts: a call with num_experts takes its block's first expert as an "
         "i32 scalar after its {} operands",
         count);
  return {int64_t(*in[count].data<int32_t>()), total.getInt()};
}

class NkiGroupedExperts final : public KernelBase {
public:
  StringRef name() const override { return "nki_grouped_experts"; }
  StringRef targetOp() const override { return "kiln.grouped_experts"; }
  OpClass opClass() const override { return OpClass::Matmul; }
  StringRef summary() const override {
    return "NKI grouped experts: tokens grouped per expert, SwiGLU GEMMs per group";
  }
  StringRef layout() const override {
    return "x [..., H], weights/ids [..., k], w1/w3 [E, I, H], w2 [E, H, I] (Kiln's layout)";
  }
  double tolerance(bool bf16) const override { return bf16 ? 5e-2 : 1e-5; }
  std::optional<NeuronKernel> neuron() const override {
    // The forward is nkilib's moe_cte (shard_on_i: blocks in turn, the
    // intermediate size split over the LNC's cores) on the call in the
    // blockwise form the lowering builds (LowerToHloBlockRouting.cpp), its
    // defaults SiLU and POST_SCALE (affinity times the down projection's
    // output), as Kiln's experts compute. The backward is nkilib's
    // experimental blockwise_mm_bwd (dropless, affinity on H: the same
    // math), which takes the forward's activations checkpointed: Kiln's
    // backward keeps only the op's operands, so a moe_cte prologue
    // recomputes them (checkpoint_activation), one expert forward more.
    using Source = NkiArgument::Source;
    using Routed = NkiRoutedTensor;
    using Role = NkiResult::Role;
    auto routed = [](const char *name, Routed t) {
      return NkiArgument{name, Source::Routed, unsigned(t)};
    };
    std::vector<NkiArgument> blockwise{routed("hidden_states", Routed::Hidden),
                                       routed("expert_affinities_masked", Routed::Affinities),
                                       routed("gate_up_proj_weight", Routed::GateUpWeights),
                                       routed("down_proj_weight", Routed::DownWeights),
                                       routed("token_position_to_id", Routed::TokenPositions),
                                       routed("block_to_expert", Routed::BlockExperts)};
    auto moeCte = [&](bool checkpoint, NkiBlockRouting routing, std::vector<NkiResult> results) {
      std::vector<NkiKeyword> shardOnI;
      if (checkpoint)
        shardOnI.push_back({"shard_on_I", NkiObject{"nkilib.core.moe.moe_cte.ShardOnIConfig",
                                                    {{"checkpoint_activation", true}}}});
      shardOnI.insert(shardOnI.begin(),
                      {"implementation",
                       NkiEnum{"nkilib.core.moe.moe_cte.MoECTEImplementation", "shard_on_i"}});
      return NkiBinding{
          "nkilib.core.moe.moe_cte",
          "moe_cte",
          blockwise,
          {{"block_size", kBlockSize},
           {"spec", NkiObject{"nkilib.core.moe.moe_cte.MoECTESpec", std::move(shardOnI)}}},
          std::move(results),
          kNkiLibrarySource.str() + "src/nkilib_src/nkilib/core/moe/moe_cte/moe_cte.py",
          routing};
    };
    // Forward (x, weights, ids, w1, w3, w2); backward (dy, ...the same).
    NkiBlockRouting forwardRouting{0, 1, 2, 3, 4, 5, kBlockSize},
        backwardRouting{1, 2, 3, 4, 5, 6, kBlockSize, /*cotangent=*/0};
    std::vector<NkiArgument> backwardArguments = blockwise;
    backwardArguments.insert(backwardArguments.begin() + 4,
                             {routed("gate_up_proj_act_checkpoint_T", Routed::GateUpActivations),
                              routed("down_proj_act_checkpoint", Routed::DownActivations)});
    backwardArguments.push_back(routed("output_hidden_states_grad", Routed::OutputGrad));
    NkiBinding backward{"nkilib.experimental.moe.bwd.blockwise_mm_backward",
                        "blockwise_mm_bwd",
                        std::move(backwardArguments),
                        {{"block_size", kBlockSize}},
                        // Kiln's (dx, d weights, d w1, d w3, d w2).
                        {{Role::RoutedRows, 0},
                         {Role::RoutedAffinities, 1},
                         {Role::GateUpWeights, 2},
                         {Role::DownWeights, 4}},
                        kNkiLibrarySource.str() +
                            "src/nkilib_src/nkilib/experimental/moe/bwd/blockwise_mm_backward.py",
                        backwardRouting};
    backward.prologue.push_back(moeCte(true, backwardRouting,
                                       {{Role::Discarded, 0},
                                        {Role::Routed, unsigned(Routed::GateUpActivations)},
                                        {Role::Routed, unsigned(Routed::DownActivations)}}));
    NeuronKernel kernel{"AwsNeuronCustomNativeKernel", "nkilib.core.moe.moe_cte.moe_cte",
                        "nkilib.experimental.moe.bwd.blockwise_mm_backward.blockwise_mm_bwd"};
    kernel.forwardBinding = moeCte(false, forwardRouting, {{Role::RoutedRows, 0}});
    kernel.backwardBinding = std::move(backward);
    return kernel;
  }

  /// The options kiln-partition records for a block of the experts
  /// (`expert_axes`, `num_experts`), checked as grouped_experts' own
  /// attributes are.
  static LogicalResult verifyExpertOptions(Operation *op, int64_t experts) {
    auto options = op->getAttrOfType<DictionaryAttr>("options");
    std::optional<SmallVector<int16_t>> axes;
    std::optional<int64_t> total;
    if (Attribute list = options ? options.get("expert_axes") : nullptr) {
      auto array = dyn_cast<ArrayAttr>(list);
      auto isAxis = [](Attribute a) {
        auto i = dyn_cast<IntegerAttr>(a);
        return i && i.getValue().isSignedIntN(16);
      };
      if (!array || !llvm::all_of(array, isAxis))
        return callError(op) << "option expert_axes " << list << " must list grid axes";
      axes.emplace();
      for (Attribute a : array)
        axes->push_back(int16_t(cast<IntegerAttr>(a).getInt()));
    }
    if (Attribute count = options ? options.get("num_experts") : nullptr) {
      if (!isa<IntegerAttr>(count))
        return callError(op) << "option num_experts " << count << " must be an integer";
      total = cast<IntegerAttr>(count).getInt();
    }
    std::optional<ArrayRef<int16_t>> axesRef;
    if (axes)
      axesRef = ArrayRef<int16_t>(*axes);
    return verifyExpertBlock(op, axesRef, total, experts, [op] { return callError(op); });
  }

  void checkConstraints(Operation *op, const KernelTarget &target,
                        SmallVectorImpl<std::string> &violations) const override {
    if (!target.isTrainium())
      return;
    auto w1 = typeOf(cast<GroupedExpertsOp>(op).getW1());
    int64_t inter = w1.getDimSize(1), hidden = w1.getDimSize(2);
    // moe_cte's shard_on_i (check_blockwise_mm_shard_I_kernel_compatibility):
    // H in [512, 8192], a multiple of a PSUM bank's 512; I a multiple of 16.
    // blockwise_mm_bwd's (validate_sharding): H and I per core of the LNC
    // multiples of 32; Kiln's CPU tiles take I in multiples of 128.
    if (hidden < 512 || hidden > 8192 || hidden % 512 != 0)
      violations.push_back(
          "512 <= hidden <= 8192, hidden % 512 == 0 (hidden = " + std::to_string(hidden) + ")");
    if (inter % 128 != 0)
      violations.push_back("moe_intermediate_size % 128 == 0 (moe_intermediate_size = " +
                           std::to_string(inter) + ")");
  }

  SmallVector<Value> substitute(OpBuilder &b, Operation *op,
                                const KernelCall &call) const override {
    auto experts = cast<GroupedExpertsOp>(op);
    SmallVector<NamedAttribute> extra;
    if (experts.getBlocked())
      extra.push_back(b.getNamedAttr("blocked", b.getBoolAttr(true)));
    Operation *kernel = createForward(b, op->getLoc(), *this, call,
                                      mergedOptions(b, call, extra), {experts.getType()},
                                      op->getOperands());
    return {kernel->getResult(0)};
  }

  LogicalResult inferResults(Operation *op, bool backward,
                             SmallVectorImpl<Type> &results) const override {
    // Forward (x, weights, ids, w1, w3, w2); backward (dy, ...the same).
    unsigned x = inputOperand(backward);
    if (failed(expectOperandCount(op, x + 6)) || failed(expectTensor(op, x, "x", -1)) ||
        failed(expectTensor(op, x + 1, "weights", -1, true)) ||
        failed(expectTensor(op, x + 3, "w1", 3)) || failed(expectTensor(op, x + 4, "w3", 3)) ||
        failed(expectTensor(op, x + 5, "w2", 3)))
      return failure();
    auto input = typeOf(op->getOperand(x)), weights = typeOf(op->getOperand(x + 1)),
         ids = typeOf(op->getOperand(x + 2)), w1 = typeOf(op->getOperand(x + 3)),
         w3 = typeOf(op->getOperand(x + 4)), w2 = typeOf(op->getOperand(x + 5));
    int64_t e = w1.getDimSize(0), inter = w1.getDimSize(1), hidden = w1.getDimSize(2);
    bool idsOk = ids.getElementType().isSignlessInteger(64) || ids.getElementType().isSignlessInteger(32);
    if (!idsOk || ids.getShape() != weights.getShape() || w3 != w1 ||
        w2.getShape() != ArrayRef<int64_t>{e, hidden, inter} ||
        input.getShape().back() != hidden ||
        input.getShape().drop_back() != weights.getShape().drop_back())
      return callError(op) << "operands x " << input << ", weights " << weights << ", ids "
                           << ids << ", w1 " << w1 << ", w3 " << w3 << ", w2 " << w2
                           << " do not form a grouped-experts call";
    // Blocked: [blocks, rows, H], one expert per row, the stacks a whole
    // number of blocks.
    if (isBlocked(op) && (input.getRank() < 2 || ids.getShape().back() != 1 ||
                          (numExperts(op) ? numExperts(op) : e) % input.getDimSize(0)))
      return callError(op) << "a blocked call takes x [blocks, rows, hidden] with one expert "
                              "per row over a whole number of blocks of the experts, got x "
                           << input << " and ids " << ids;
    if (backward && op->getOperand(0).getType() != input)
      return callError(op) << "dy must have x's type " << input;
    if (failed(verifyExpertOptions(op, e)))
      return failure();
    results.push_back(input);
    if (backward)
      results.append({weights, w1, w3, w2});
    return success();
  }

  double flops(Operation *op, bool backward) const override {
    unsigned x = inputOperand(backward);
    auto w1 = typeOf(op->getOperand(x + 3));
    // A block of the experts takes its share of the pairs at a balanced load;
    // blocked, every row of its buffer.
    double pairs = double(typeOf(op->getOperand(x + 2)).getNumElements());
    if (int64_t total = numExperts(op); total && !isBlocked(op))
      pairs *= double(w1.getDimSize(0)) / double(total);
    double forward = expertFlops(pairs, w1.getDimSize(2), w1.getDimSize(1));
    return backward ? forward * 8 / 3 : forward;
  }
  ShardingRule shardingRule(Operation *op, bool backward) const override {
    // Its expert loop splits as kiln.grouped_experts' does.
    return groupedExpertsShardingRule(typeOf(op->getOperand(backward ? 1 : 0)).getRank(),
                                      backward, /*expertParallel=*/true, isBlocked(op));
  }
  void localize(Operation *clone, Operation *global, bool, ArrayRef<GridAxes> loops) const override {
    // The expert loop is the first dimension of w1.
    unsigned w1 = w1Operand(global);
    int64_t expertLoop = shardingRule(global, !isa<KernelOp>(global)).operands[w1][0];
    const GridAxes &axes = loops[expertLoop];
    if (axes.empty())
      return;
    Builder b(clone->getContext());
    NamedAttrList options(clone->getAttrOfType<DictionaryAttr>("options"));
    options.set("expert_axes", b.getI64ArrayAttr(SmallVector<int64_t>(axes.begin(), axes.end())));
    options.set("num_experts", b.getI64IntegerAttr(typeOf(global->getOperand(w1)).getDimSize(0)));
    clone->setAttr("options", options.getDictionary(b.getContext()));
  }
  std::optional<GridBlock> gridBlock(Operation *op) const override {
    auto options = op->getAttrOfType<DictionaryAttr>("options");
    auto axes = options ? options.getAs<ArrayAttr>("expert_axes") : nullptr;
    if (!axes)
      return std::nullopt;
    GridBlock block;
    for (Attribute a : axes)
      block.axes.push_back(int16_t(cast<IntegerAttr>(a).getInt()));
    block.rows = typeOf(op->getOperand(w1Operand(op))).getDimSize(0);
    return block;
  }

  LogicalResult buildVjp(Operation *forward, OpBuilder &b, ArrayRef<Value> grads,
                         SmallVectorImpl<Value> &operandGrads) const override {
    SmallVector<Value> operands{grads[0]};
    operands.append(forward->operand_begin(), forward->operand_end());
    ValueRange in = forward->getOperands();
    Operation *bwd = createBackward(
        b, forward, {in[0].getType(), in[1].getType(), in[3].getType(), in[4].getType(),
                     in[5].getType()},
        operands);
    operandGrads.append({bwd->getResult(0), bwd->getResult(1), nullptr, bwd->getResult(2),
                         bwd->getResult(3), bwd->getResult(4)});
    return success();
  }
  SmallVector<unsigned> cotangentOperands() const override { return {0}; }

  KernelCheckShape checkShape() const override {
    return {{"tokens", 64}, {"hidden", 64}, {"intermediate", 32}, {"experts", 8}, {"top_k", 2}};
  }
  std::string checkShapeProblem(const KernelCheckShape &s) const override {
    // Each token picks top_k distinct experts.
    int64_t e = dim(s, "experts"), k = dim(s, "top_k");
    return k > e ? fmt::format("top_k={} is more than experts={}: a token's choices are "
                               "distinct experts",
                               k, e)
                 : "";
  }
  SmallVector<CheckInput> checkInputs(MLIRContext *context,
                                      const KernelCheckShape &s) const override {
    Type f32 = Float32Type::get(context), i64 = IntegerType::get(context, 64);
    int64_t t = dim(s, "tokens"), h = dim(s, "hidden"), i = dim(s, "intermediate"),
            e = dim(s, "experts"), k = dim(s, "top_k");
    auto w = RankedTensorType::get({e, i, h}, f32);
    return {{"x", RankedTensorType::get({t, h}, f32)},
            {"weights", RankedTensorType::get({t, k}, f32)},
            {"experts", RankedTensorType::get({t, k}, i64), e, /*distinctPerRow=*/true},
            {"w1", w},
            {"w3", w},
            {"w2", RankedTensorType::get({e, h, i}, f32)}};
  }
  SmallVector<CheckResult> buildReference(OpBuilder &b, Location loc, ValueRange in,
                                                     const KernelCheckShape &,
                                                     StringAttr fqn) const override {
    return {{GroupedExpertsOp::create(b, loc, in[0], in[1], in[2], in[3], in[4], in[5], fqn,
                                      /*expert_axes=*/nullptr, /*num_experts=*/nullptr,
                                      /*blocked=*/nullptr, /*round_to=*/nullptr),
             "out"}};
  }

  void runForward(DictionaryAttr options, MutableArrayRef<Tensor> in,
                  SmallVectorImpl<Tensor> &out) const override {
    out.push_back(kernels::groupedExperts(in[0], in[1], in[2], in[3], in[4], in[5],
                                          expertShard(options, in, 6)));
  }
  void runBackward(DictionaryAttr options, MutableArrayRef<Tensor> in,
                   SmallVectorImpl<Tensor> &out) const override {
    kernels::GroupedExpertsGrads g = kernels::groupedExpertsBackward(
        in[0], in[1], in[2], in[3], in[4], in[5], in[6], expertShard(options, in, 7));
    out.append({g.x, g.weights, g.w1, g.w3, g.w2});
  }
};

} // namespace

void registerNkiGroupedExperts() { registerKernelSpec(std::make_unique<NkiGroupedExperts>()); }

} // namespace kiln::kernel_ir
