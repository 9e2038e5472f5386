//===- KilnOpModels.cpp - Host kernels bound to kiln ops ------------------===//
//
// One `run` overload per op maps the op's attributes and host operands to a
// kernel of Runtime/ForwardKernels or Runtime/BackwardKernels; CpuKernel<Op> makes
// each an external model of CpuKernelOpInterface.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/CPU/CpuKernelInterface.h"
#include "kiln/Backend/CPU/CollectiveKernels.h"
#include "kiln/Backend/CPU/CpuKernelImpl.h"
#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Support/Error.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ExpertDispatchKernels.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Runtime/LossParallel.h"
#include "kiln/Runtime/LrSchedule.h"
#include "kiln/Runtime/MoeKernels.h"

#include "mlir/IR/MLIRContext.h"

#include <cmath>

#include "kiln/Backend/CPU/CpuKernelInterface.cpp.inc"

using namespace mlir;

namespace kiln {
namespace {

using Context = ExecutionContext;
using In = MutableArrayRef<Tensor>;
using Out = SmallVectorImpl<Tensor>;

Tensor scalarTensor(float value) {
  Tensor t(DType::F32, {});
  *t.mutableData<float>() = value;
  return t;
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

/// The block of `rows` that this rank holds of a dimension (`what`) split
/// over `axes`: its first index and the whole size; {0, 0} when nothing is
/// split.
std::pair<int64_t, int64_t> blockOfSplit(Operation *op, const Context &ctx,
                                         std::optional<ArrayRef<int16_t>> axes, int64_t rows,
                                         const char *what) {
  if (!axes || axes->empty())
    return {0, 0};
  if (!ctx.grid)
    fail("{} (fqn '{}'): {} split over grid axes needs a device grid",
         op->getName().getStringRef().str(), op->getAttrOfType<StringAttr>("fqn").str(), what);
  std::vector<int16_t> list(axes->begin(), axes->end());
  return {ctx.grid->groupIndex(list) * rows, ctx.grid->groupSize(list) * rows};
}

/// The block of a vocabulary split over `axes` that this rank holds, of
/// `rows` ids; the whole vocabulary when nothing is split.
kernels::VocabShard vocabShard(Operation *op, const Context &ctx,
                               std::optional<ArrayRef<int16_t>> axes, int64_t rows) {
  auto [offset, total] = blockOfSplit(op, ctx, axes, rows, "a vocabulary");
  return {offset, total};
}

void run(EmbeddingOp op, const Context &ctx, In in, Out &out) {
  out.push_back(kernels::embedding(in[0], in[1],
                                   vocabShard(op, ctx, op.getVocabAxes(), in[0].dim(0))));
}
void run(RmsNormOp op, const Context &, In in, Out &out) {
  out.push_back(kernels::rmsNorm(in[0], in[1], op.getEps().convertToFloat()));
}
void run(LinearOp, const Context &, In in, Out &out) {
  out.push_back(kernels::linear(in[0], in[1]));
}
void run(RopeCacheOp op, const Context &, In, Out &out) {
  out.push_back(kernels::ropeCache(op.getInverseFrequencies(), int64_t(op.getSeqLen()),
                                   SequenceLayout::ofChunks(op.getHeadTailChunks())));
}
void run(RopeOp, const Context &, In in, Out &out) {
  out.push_back(kernels::rope(in[0], in[2]));
  out.push_back(kernels::rope(in[1], in[2]));
}
/// The rows of the sequence this rank's queries are (context parallelism)
/// and the sequence's layout.
template <typename OpT>
kernels::AttentionBlock attentionBlock(OpT op, const Context &ctx, const Tensor &q) {
  return {blockOfSplit(op, ctx, op.getQueryAxes(), q.dim(1), "a query sequence").first,
          SequenceLayout::ofChunks(op.getHeadTailChunks())};
}
void run(AttentionOp op, const Context &ctx, In in, Out &out) {
  auto [o, lse] =
      kernels::attention(in[0], in[1], in[2], op.getCausal(), op.getScale().convertToFloat(),
                         attentionBlock(op, ctx, in[0]));
  out.append({o, lse});
}
void run(SwigluOp, const Context &, In in, Out &out) {
  out.push_back(kernels::swiglu(in[0], in[1]));
}
void run(AddOp, const Context &, In in, Out &out) {
  out.push_back(kernels::add(std::move(in[0]), in[1]));
}
/// The runtime's narrow type for a cast's or rounding attribute's `to`.
DType narrowType(Type to) { return to.isBF16() ? DType::BF16 : DType::F16; }
void run(CastOp op, const Context &, In in, Out &out) {
  out.push_back(kernels::roundTo(std::move(in[0]), narrowType(op.getTo())));
}
/// local positions / total positions: a rank's share of a split mean.
float positionShare(std::optional<uint64_t> total, const Tensor &labels) {
  return total ? float(double(labels.numel()) / double(*total)) : 1.0f;
}
void run(CrossEntropyOp op, const Context &, In in, Out &out) {
  Tensor loss = kernels::crossEntropy(in[0], in[1]);
  *loss.mutableData<float>() *= positionShare(op.getTotalPositions(), in[1]);
  out.push_back(loss);
}
void run(PadOp op, const Context &, In in, Out &out) {
  out.push_back(kernels::padDim(in[0], int64_t(op.getDim()), int64_t(op.getSize())));
}
void run(NarrowOp op, const Context &, In in, Out &out) {
  out.push_back(kernels::narrowDim(in[0], int64_t(op.getDim()), int64_t(op.getSize())));
}
void run(ReshapeOp op, const Context &, In in, Out &out) {
  out.push_back(in[0].reshaped(Shape(op.getShape().begin(), op.getShape().end())));
}
void run(TransposeOp op, const Context &, In in, Out &out) {
  ArrayRef<int64_t> perm = op.getPermutation();
  out.push_back(kernels::transpose(in[0], std::vector<int64_t>(perm.begin(), perm.end())));
}

//===----------------------------------------------------------------------===//
// Substituted kernels: their spec's CPU implementation
//===----------------------------------------------------------------------===//

const CpuKernelImpl &cpuImpl(Operation *op, const KernelSpec &spec) {
  if (auto *impl = dynamic_cast<const CpuKernelImpl *>(&spec))
    return *impl;
  fail("{} (fqn '{}'): kernel '{}' has no CPU implementation", op->getName().getStringRef().str(),
       op->getAttrOfType<StringAttr>("fqn").str(), spec.name().str());
}
/// A call's operands, and the first row of its block of a split where it
/// computes one (KernelSpec::gridBlock), as an i32 scalar after them.
template <typename OpT> void runKernel(OpT op, const Context &ctx, In in, Out &out) {
  const KernelSpec &spec = op.getSpec();
  // A call on a block of a split also takes the block's first row.
  In operands = in;
  std::vector<Tensor> withBlock;
  if (std::optional<GridBlock> block = spec.gridBlock(op)) {
    withBlock.assign(in.begin(), in.end());
    Tensor first(DType::I32, {});
    *first.mutableData<int32_t>() =
        int32_t(blockOfSplit(op, ctx, ArrayRef<int16_t>(block->axes), block->rows,
                             "a kernel's block of a split").first);
    withBlock.push_back(first);
    operands = withBlock;
  }
  if constexpr (std::is_same_v<OpT, KernelOp>)
    cpuImpl(op, spec).runForward(op.getOptions(), operands, out);
  else
    cpuImpl(op, spec).runBackward(op.getOptions(), operands, out);
}
void run(KernelOp op, const Context &ctx, In in, Out &out) { runKernel(op, ctx, in, out); }
void run(KernelBackwardOp op, const Context &ctx, In in, Out &out) {
  runKernel(op, ctx, in, out);
}
//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

void run(ConstantOp op, const Context &, In, Out &out) {
  auto value = cast<SplatElementsAttr>(op.getValue());
  auto type = cast<RankedTensorType>(value.getType());
  Tensor t = Tensor::uninitialized(DType::F32, Shape(type.getShape().begin(), type.getShape().end()));
  std::fill_n(t.mutableData<float>(), t.numel(), value.getSplatValue<APFloat>().convertToFloat());
  out.push_back(t);
}
void run(EmbeddingBackwardOp op, const Context &ctx, In in, Out &out) {
  int64_t rows = int64_t(op.getVocabSize());
  out.push_back(kernels::embeddingBackward(in[0], in[1], rows,
                                           vocabShard(op, ctx, op.getVocabAxes(), rows)));
}
void run(RmsNormBackwardOp op, const Context &, In in, Out &out) {
  auto [dx, dw] = kernels::rmsNormBackward(in[0], in[1], in[2], op.getEps().convertToFloat());
  out.append({dx, dw});
}
void run(LinearBackwardDataOp, const Context &, In in, Out &out) {
  out.push_back(kernels::linearBackwardData(in[0], in[1]));
}
void run(LinearBackwardWeightOp, const Context &, In in, Out &out) {
  out.push_back(kernels::linearBackwardWeight(in[0], in[1]));
}
void run(RopeBackwardOp, const Context &, In in, Out &out) {
  out.push_back(kernels::ropeBackward(in[0], in[2]));
  out.push_back(kernels::ropeBackward(in[1], in[2]));
}
void run(AttentionBackwardOp op, const Context &ctx, In in, Out &out) {
  auto [dq, dk, dv] =
      kernels::attentionBackward(in[0], in[1], in[2], in[3], in[4], in[5], op.getCausal(),
                                 op.getScale().convertToFloat(), attentionBlock(op, ctx, in[1]));
  out.append({dq, dk, dv});
}
void run(SwigluBackwardOp, const Context &, In in, Out &out) {
  auto [dgate, dup] = kernels::swigluBackward(in[0], in[1], in[2]);
  out.append({dgate, dup});
}
void run(CrossEntropyBackwardOp op, const Context &, In in, Out &out) {
  Tensor lossGrad = scalarTensor(*in[2].data<float>() *
                                 positionShare(op.getTotalPositions(), in[1]));
  out.push_back(kernels::crossEntropyBackward(in[0], in[1], lossGrad));
}

//===----------------------------------------------------------------------===//
// Loss parallel
//===----------------------------------------------------------------------===//

void run(VocabParallelMaxOp, const Context &, In in, Out &out) {
  out.push_back(kernels::rowMax(in[0]));
}
void run(VocabParallelStatsOp op, const Context &ctx, In in, Out &out) {
  out.push_back(kernels::vocabShardStats(
      in[0], in[1], in[2], vocabShard(op, ctx, op.getVocabAxes(), in[0].shape().back())));
}
void run(VocabParallelLossOp op, const Context &, In in, Out &out) {
  out.push_back(kernels::lossFromStats(
      in[0], in[1], int64_t(op.getTotalPositions().value_or(in[0].numel()))));
}
void run(VocabParallelLossBackwardOp op, const Context &ctx, In in, Out &out) {
  out.push_back(kernels::lossFromStatsBackward(
      in[0], in[1], *in[2].data<float>(), in[3], in[4],
      vocabShard(op, ctx, op.getVocabAxes(), in[0].shape().back()),
      int64_t(op.getTotalPositions().value_or(in[1].numel()))));
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

void run(RouterOp op, const Context &, In in, Out &out) {
  kernels::RouterOutputs r = kernels::router(in[0], int64_t(op.getTopK()),
                                             op.getNormTopkProb(),
                                             op.getExpertBias() ? &in[1] : nullptr);
  out.append({r.weights, r.experts, r.probs});
}
/// The block of the experts this rank's stacks hold (expert parallelism).
template <typename OpT> kernels::ExpertShard expertShard(OpT op, const Context &ctx) {
  auto [offset, total] = blockOfSplit(op, ctx, op.getExpertAxes(),
                                      op.getW1().getType().getDimSize(0), "a stack of experts");
  return {offset, total};
}
/// What a grouped-experts op rounds its activations to: F32 for nothing.
template <typename OpT> DType expertRounding(OpT op) {
  std::optional<Type> to = op.getRoundTo();
  return to ? narrowType(*to) : DType::F32;
}

void run(GroupedExpertsOp op, const Context &ctx, In in, Out &out) {
  out.push_back(kernels::groupedExperts(in[0], in[1], in[2], in[3], in[4], in[5],
                                        expertShard(op, ctx), expertRounding(op)));
}
/// The variadic operands [first, first + count) as a vector.
std::vector<Tensor> slice(In in, size_t first, size_t count) {
  return std::vector<Tensor>(in.begin() + first, in.begin() + first + count);
}
void run(LoadBalancingLossOp op, const Context &, In in, Out &out) {
  size_t layers = op.getProbs().size();
  out.push_back(kernels::loadBalancingLoss(slice(in, 0, layers), slice(in, layers, layers)));
}
void run(ExpertBiasUpdateOp op, const Context &, In in, Out &out) {
  out.push_back(kernels::expertBiasUpdate(in[0], slice(in, 1, op.getExperts().size()),
                                          op.getCoeff().convertToDouble()));
}
void run(ScaleOp op, const Context &, In in, Out &out) {
  Tensor scaled = Tensor::uninitialized(DType::F32, in[0].shape());
  float factor = float(op.getFactor().convertToDouble());
  for (int64_t i = 0; i < scaled.numel(); ++i)
    scaled.mutableData<float>()[i] = in[0].data<float>()[i] * factor;
  out.push_back(scaled);
}
void run(RouterBackwardOp op, const Context &, In in, Out &out) {
  out.push_back(kernels::routerBackward(in[0], in[1], in[2], &in[3], op.getNormTopkProb()));
}
void run(GroupedExpertsBackwardOp op, const Context &ctx, In in, Out &out) {
  kernels::GroupedExpertsGrads g = kernels::groupedExpertsBackward(
      in[0], in[1], in[2], in[3], in[4], in[5], in[6], expertShard(op, ctx),
      expertRounding(op));
  out.append({g.x, g.weights, g.w1, g.w3, g.w2});
}
void run(ExpertDispatchOp op, const Context &, In in, Out &out) {
  kernels::DispatchOutputs d = kernels::expertDispatch(
      in[0], in[1], in[2],
      {int64_t(op.getGroups()), int64_t(op.getChunks()), int64_t(op.getCapacity())},
      int64_t(op.getNumExperts()));
  out.append({d.rows, d.rowWeights, d.rowExperts, d.slots});
}
void run(ExpertCombineOp op, const Context &, In in, Out &out) {
  out.push_back(kernels::expertCombine(in[0], in[1], int64_t(op.getChunks())));
}
void run(ExpertDispatchBackwardOp op, const Context &, In in, Out &out) {
  auto [dx, dw] = kernels::expertDispatchBackward(in[0], in[1], in[2], int64_t(op.getChunks()));
  out.append({dx, dw});
}
void run(ExpertCombineBackwardOp op, const Context &, In in, Out &out) {
  out.push_back(kernels::expertCombineBackward(
      in[0], in[1],
      {int64_t(op.getGroups()), int64_t(op.getChunks()), int64_t(op.getCapacity())}));
}
void run(LoadBalancingLossBackwardOp op, const Context &, In in, Out &out) {
  for (Tensor &grad : kernels::loadBalancingLossBackward(
           in[0], slice(in, 1, in.size() - 1), int64_t(op.getNumExperts())))
    out.push_back(std::move(grad));
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

void run(GlobalNormOp op, const Context &, In in, Out &out) {
  std::vector<Tensor> tensors(in.begin(), in.end());
  out.push_back(op.getSquared() ? scalarTensor(float(kernels::sumOfSquares(tensors)))
                                : kernels::globalNorm(tensors));
}
void run(SqrtOp, const Context &, In in, Out &out) {
  Tensor root = Tensor::uninitialized(DType::F32, in[0].shape());
  for (int64_t i = 0; i < root.numel(); ++i)
    root.mutableData<float>()[i] = std::sqrt(in[0].data<float>()[i]);
  out.push_back(root);
}
void run(ClipCoefOp op, const Context &, In in, Out &out) {
  // torch.nn.utils.clip_grad_norm_: clamp(max_norm / (norm + 1e-6), max=1).
  double norm = *in[0].data<float>();
  double coef = op.getMaxNorm().convertToDouble() / (norm + 1e-6);
  out.push_back(scalarTensor(float(std::min(1.0, coef))));
}
void run(LrScheduleOp op, const Context &, In in, Out &out) {
  LrPhases phases{int64_t(op.getWarmupSteps()), int64_t(op.getStableSteps()),
                  int64_t(op.getDecaySteps())};
  double factor = lrFactor(*in[0].data<int64_t>(), phases, op.getDecayType(),
                           op.getMinLrFactor().convertToDouble());
  out.push_back(scalarTensor(float(op.getLr().convertToDouble() * factor)));
}
void run(AdamWOp op, const Context &, In in, Out &out) {
  kernels::AdamWHyper hyper;
  hyper.lr = *in[5].data<float>();
  hyper.beta1 = op.getBeta1().convertToDouble();
  hyper.beta2 = op.getBeta2().convertToDouble();
  hyper.eps = op.getEps().convertToDouble();
  hyper.weightDecay = op.getWeightDecay().convertToDouble();
  hyper.step = *in[4].data<int64_t>() + 1;
  hyper.gradScale = *in[6].data<float>();
  auto [param, m, v] =
      kernels::adamw(std::move(in[0]), in[1], std::move(in[2]), std::move(in[3]), hyper);
  out.append({param, m, v});
}
void run(NextStepOp, const Context &, In in, Out &out) {
  Tensor next(DType::I64, {});
  *next.mutableData<int64_t>() = *in[0].data<int64_t>() + 1;
  out.push_back(next);
}

template <typename OpT>
struct CpuKernel : CpuKernelOpInterface::ExternalModel<CpuKernel<OpT>, OpT> {
  void runOnCpu(Operation *op, const Context &context, In operands, Out &results) const {
    run(cast<OpT>(op), context, operands, results);
  }
};

template <typename... OpTs> void attach(MLIRContext *context) {
  (OpTs::template attachInterface<CpuKernel<OpTs>>(*context), ...);
}

void attachAll(MLIRContext *context, KilnDialect *) {
  attach<EmbeddingOp, RmsNormOp, LinearOp, RopeCacheOp, RopeOp, AttentionOp, SwigluOp, AddOp,
         CastOp, CrossEntropyOp, ReshapeOp, PadOp, NarrowOp, TransposeOp>(context);
  attach<KernelOp, KernelBackwardOp>(context);
  attach<ConstantOp, EmbeddingBackwardOp, RmsNormBackwardOp, LinearBackwardDataOp,
         LinearBackwardWeightOp, RopeBackwardOp, AttentionBackwardOp, SwigluBackwardOp,
         CrossEntropyBackwardOp>(context);
  attach<RouterOp, GroupedExpertsOp, LoadBalancingLossOp, ScaleOp, ExpertBiasUpdateOp,
         RouterBackwardOp,
         GroupedExpertsBackwardOp, LoadBalancingLossBackwardOp>(context);
  attach<ExpertDispatchOp, ExpertCombineOp, ExpertDispatchBackwardOp, ExpertCombineBackwardOp>(
      context);
  attach<GlobalNormOp, SqrtOp, ClipCoefOp, LrScheduleOp, AdamWOp, NextStepOp>(context);
  attach<VocabParallelMaxOp, VocabParallelStatsOp, VocabParallelLossOp,
         VocabParallelLossBackwardOp>(context);
}

} // namespace

void registerCpuKernels(DialectRegistry &registry) {
  registry.addExtension(&attachAll);
  registerCollectiveKernels(registry);
}

void registerCpuKernels(MLIRContext &context) {
  DialectRegistry registry;
  registerCpuKernels(registry);
  context.appendDialectRegistry(registry);
}

} // namespace kiln
