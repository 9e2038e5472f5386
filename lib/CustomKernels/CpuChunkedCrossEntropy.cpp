//===- CpuChunkedCrossEntropy.cpp - Output projection + loss, chunked -----===//
//
// Takes in the output projection feeding kiln.cross_entropy: logits =
// h @ W^T and their mean cross-entropy are computed a chunk of rows at a
// time, so the [tokens, vocab] logits (and their gradient) never exist as
// values. The loss is the end of the graph and linear in its cotangent, so
// the forward also computes the unscaled gradients dL/dh and dL/dW while a
// chunk's logits are at hand; the backward only scales them. The saved
// activations drop from the logits ([tokens, vocab]) to dL/dW ([vocab,
// hidden]) and dL/dh; no logits are recomputed. CPU only: no NKI kernel.
//
//===----------------------------------------------------------------------===//

#include "KernelBase.h"

#include "kiln/Runtime/ChunkedCrossEntropy.h"

namespace kiln::kernel_ir {
namespace {

class ChunkedCrossEntropy final : public KernelBase {
public:
  StringRef name() const override { return "chunked_cross_entropy"; }
  StringRef targetOp() const override { return "kiln.cross_entropy"; }
  // Fuses the output projection into the loss: a GEMM's work, not a vector op's.
  OpClass opClass() const override { return OpClass::Matmul; }
  StringRef summary() const override {
    return "output projection + cross-entropy in row chunks: no [tokens, vocab] logits";
  }
  StringRef layout() const override {
    return "h [..., hidden], W [vocab, hidden] (the projection's weight), labels [...]";
  }
  double tolerance(bool bf16) const override { return bf16 ? 2e-2 : 1e-5; }

  std::string unsupportedForm(Operation *op) const override {
    auto linear = cast<CrossEntropyOp>(op).getLogits().getDefiningOp<LinearOp>();
    if (!linear)
      return "its logits are not produced by a kiln.linear (the output projection)";
    if (!linear->hasOneUse())
      return "its logits (from " + linear.getFqn().str() + ") have other users";
    return "";
  }
  SmallVector<Operation *> absorbed(Operation *op) const override {
    return {cast<CrossEntropyOp>(op).getLogits().getDefiningOp()};
  }

  void checkConstraints(Operation *, const KernelTarget &target,
                        SmallVectorImpl<std::string> &violations) const override {
    if (target.name != TargetName::Cpu)
      violations.push_back(
          "target.name == \"cpu\" (a CPU-only kernel, without a Neuron implementation, "
          "checked against \"" +
          std::string(wordOf(target.name)) +
          "\": kiln train and calibrate-cpu check kernels "
          "against cpu and kiln compile, check-hlo, capture and plan against trn2, unless "
          "target.name says otherwise)");
  }

  SmallVector<Value> substitute(OpBuilder &b, Operation *op,
                                const KernelCall &call) const override {
    auto ce = cast<CrossEntropyOp>(op);
    auto linear = ce.getLogits().getDefiningOp<LinearOp>();
    SmallVector<NamedAttribute> extra;
    if (ce.getTotalPositionsAttr())
      extra.push_back(b.getNamedAttr("total_positions", ce.getTotalPositionsAttr()));
    Value h = linear.getInput(), w = linear.getWeight();
    Operation *kernel =
        createForward(b, op->getLoc(), *this, call, mergedOptions(b, call, extra),
                      {ce.getType(), h.getType(), w.getType()}, {h, w, ce.getLabels()});
    return {kernel->getResult(0)};
  }

  ArrayRef<StringLiteral> ruleOptions() const override {
    static constexpr StringLiteral options[] = {"chunk_rows"};
    return options;
  }

  LogicalResult inferResults(Operation *op, bool backward,
                             SmallVectorImpl<Type> &results) const override {
    auto options = op->getAttrOfType<DictionaryAttr>("options");
    if (Attribute rows = options.get("chunk_rows"))
      if (!isa<IntegerAttr>(rows) || cast<IntegerAttr>(rows).getInt() < 1)
        return callError(op) << "option 'chunk_rows' must be a positive integer, got " << rows;
    auto scalar = RankedTensorType::get({}, Float32Type::get(op->getContext()));
    if (backward) {
      // (dloss, dL/dh, dL/dW) -> (dh, dW)
      if (failed(expectOperandCount(op, 3)) || failed(expectTensor(op, 0, "dloss", 0, true)) ||
          failed(expectTensor(op, 1, "dL/dh", -1)) || failed(expectTensor(op, 2, "dL/dW", 2)))
        return failure();
      results.append({op->getOperand(1).getType(), op->getOperand(2).getType()});
      return success();
    }
    if (failed(expectOperandCount(op, 3)) || failed(expectTensor(op, 0, "h", -1)) ||
        failed(expectTensor(op, 1, "W", 2)))
      return failure();
    auto h = typeOf(op->getOperand(0)), w = typeOf(op->getOperand(1)),
         labels = typeOf(op->getOperand(2));
    bool idsOk = labels.getElementType().isSignlessInteger(64) ||
                 labels.getElementType().isSignlessInteger(32);
    if (!idsOk || h.getShape().back() != w.getDimSize(1) ||
        labels.getShape() != h.getShape().drop_back())
      return callError(op) << "h " << h << ", W " << w << " and labels " << labels
                           << " must be [..., hidden], [vocab, hidden] and integer [...]";
    results.append({scalar, h, w});
    return success();
  }

  double flops(Operation *op, bool backward) const override {
    if (backward)
      return double(typeOf(op->getOperand(1)).getNumElements()) +
             double(typeOf(op->getOperand(2)).getNumElements());
    auto h = typeOf(op->getOperand(0));
    int64_t rows = h.getNumElements() / h.getShape().back(), hidden = h.getShape().back(),
            vocab = typeOf(op->getOperand(1)).getDimSize(0);
    // The logits GEMM and the two gradient GEMMs, plus softmax per logit.
    return 6.0 * rows * hidden * vocab + 6.0 * rows * vocab;
  }

  // Every logit is read by the row's max, read and written by its exp and
  // again by the scaling into dlogits: five float passes besides the GEMMs'.
  int64_t passBytes(Operation *op, bool backward) const override {
    if (backward)
      return 0;
    auto h = typeOf(op->getOperand(0));
    int64_t rows = h.getNumElements() / std::max<int64_t>(h.getShape().back(), 1);
    return 5 * rows * typeOf(op->getOperand(1)).getDimSize(0) * int64_t(sizeof(float));
  }

  // Per chunk of n rows, as kernels::chunkedCrossEntropy issues them: the
  // logits h_c W^T, dL/dh_c = dlogits W and dL/dW (+)= dlogits^T h_c, which
  // streams all of W and dL/dW for each chunk. The backward only scales.
  void gemms(Operation *op, bool backward, SmallVectorImpl<GemmShape> &out) const override {
    if (backward)
      return;
    auto h = typeOf(op->getOperand(0));
    int64_t hidden = h.getShape().back(), rows = h.getNumElements() / std::max<int64_t>(hidden, 1),
            vocab = typeOf(op->getOperand(1)).getDimSize(0);
    if (rows == 0)
      return;
    auto options = op->getAttrOfType<DictionaryAttr>("options");
    int64_t chunk = kernels::resolveChunkRows(rows, intOption(options, "chunk_rows").value_or(0));
    auto perChunk = [&](int64_t n, int64_t count, bool accumulate) {
      if (count > 0)
        out.append({{n, vocab, hidden, false, true, false, count},
                    {n, hidden, vocab, false, false, false, count},
                    {vocab, hidden, n, true, false, accumulate, count}});
    };
    perChunk(chunk, 1, false); // the first chunk's dL/dW has beta = 0
    perChunk(chunk, rows / chunk - 1, true);
    perChunk(rows % chunk, rows % chunk ? 1 : 0, true);
  }

  ShardingRule shardingRule(Operation *op, bool backward) const override {
    ShardingRule rule;
    int64_t leadRank = typeOf(op->getOperand(backward ? 1 : 0)).getRank() - 1;
    SmallVector<int64_t> lead;
    for (int64_t i = 0; i < leadRank; ++i)
      lead.push_back(rule.loop());
    int64_t k = rule.loop(false), v = rule.loop(false);
    SmallVector<int64_t> h(lead);
    h.push_back(k);
    if (backward) {
      // dW = dloss * the saved dL/dW, with dloss the same on every rank: a
      // saved dL/dW pending its sum over the positions' split stays pending,
      // so a tied embedding's two gradients are summed before one
      // reduce-scatter rather than each all-reduced.
      rule.operands = {{}, h, {v, k}};
      rule.results = {h, {v, k}};
      rule.pendingSumFrom = {-1, 2};
      return rule;
    }
    // Splitting the positions leaves the mean and dL/dW partial sums (the
    // partitioner sets total_positions, as for kiln.cross_entropy).
    rule.operands = {h, {v, k}, lead};
    rule.results = {{}, h, {v, k}};
    rule.reductions = {lead, {}, lead};
    return rule;
  }

  void localize(Operation *clone, Operation *global, bool split,
                ArrayRef<GridAxes>) const override {
    if (!split)
      return;
    // Only the forward normalises by the positions of every rank; the
    // backward reads that from its cotangent.
    auto call = dyn_cast<KernelOp>(clone);
    if (!call)
      return;
    OpBuilder b(clone);
    int64_t total = typeOf(global->getOperand(2)).getNumElements();
    NamedAttrList options(call.getOptions());
    options.set("total_positions", b.getI64IntegerAttr(total));
    call.setOptionsAttr(options.getDictionary(b.getContext()));
  }

  LogicalResult buildVjp(Operation *forward, OpBuilder &b, ArrayRef<Value> grads,
                         SmallVectorImpl<Value> &operandGrads) const override {
    if (grads[1] || grads[2])
      return callError(forward) << "the saved gradients have cotangents; they may only feed "
                                   "the kernel's backward";
    Operation *bwd = createBackward(
        b, forward, {forward->getOperand(0).getType(), forward->getOperand(1).getType()},
        {grads[0], forward->getResult(1), forward->getResult(2)});
    operandGrads.append({bwd->getResult(0), bwd->getResult(1), nullptr});
    return success();
  }
  SmallVector<unsigned> cotangentOperands() const override { return {0}; }

  KernelCheckShape checkShape() const override {
    return {{"batch", 2}, {"seq", 48}, {"hidden", 64}, {"vocab", 1000}};
  }
  SmallVector<CheckInput> checkInputs(MLIRContext *context,
                                      const KernelCheckShape &s) const override {
    Type f32 = Float32Type::get(context), i64 = IntegerType::get(context, 64);
    int64_t b = dim(s, "batch"), seq = dim(s, "seq"), h = dim(s, "hidden"),
            v = dim(s, "vocab");
    return {{"h", RankedTensorType::get({b, seq, h}, f32)},
            {"weight", RankedTensorType::get({v, h}, f32)},
            {"labels", RankedTensorType::get({b, seq}, i64), v}};
  }
  SmallVector<CheckResult> buildReference(OpBuilder &b, Location loc, ValueRange in,
                                                     const KernelCheckShape &,
                                                     StringAttr fqn) const override {
    Value logits = LinearOp::create(b, loc, in[0], in[1], b.getStringAttr("output"));
    return {{CrossEntropyOp::create(b, loc, logits, in[2], fqn, nullptr), "loss"}};
  }

  void runForward(DictionaryAttr options, MutableArrayRef<Tensor> in,
                  SmallVectorImpl<Tensor> &out) const override {
    kernels::ChunkedCrossEntropyResult r = kernels::chunkedCrossEntropy(
        in[0], in[1], in[2], intOption(options, "total_positions"),
        intOption(options, "chunk_rows").value_or(0));
    out.append({r.loss, r.gradH, r.gradW});
  }
  void runBackward(DictionaryAttr, MutableArrayRef<Tensor> in,
                   SmallVectorImpl<Tensor> &out) const override {
    auto [dh, dw] =
        kernels::chunkedCrossEntropyBackward(in[0], std::move(in[1]), std::move(in[2]));
    out.append({dh, dw});
  }
};

} // namespace

void registerChunkedCrossEntropy() { registerKernelSpec(std::make_unique<ChunkedCrossEntropy>()); }

} // namespace kiln::kernel_ir
