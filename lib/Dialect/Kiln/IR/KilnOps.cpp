//===- KilnOps.cpp - kiln op shape rules, verifiers, costs, kernels -------===//
//
// For each op, in one place: the shape rule (inferReturnTypes, which doubles
// as the structural verifier so malformed IR is rejected with a message
// naming the op and its fqn), any extra attribute checks, the cost, and the
// buffers a result may share (views, tied operands).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "ShapeRules.h"
#include "kiln/Dialect/Kiln/IR/ParameterUses.h"
#include "kiln/Support/RopeFrequencies.h"
#include "kiln/Support/SequenceLayout.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::detail;

int64_t kiln::tensorBytes(TypeRange types) {
  int64_t total = 0;
  for (Type type : types)
    if (auto tensor = dyn_cast<RankedTensorType>(type))
      total += tensor.getNumElements() *
               ((tensor.getElementTypeBitWidth() + 7) / 8);
  return total;
}

StringRef kiln::owningModule(Value value) {
  auto fqnOf = [](Operation *op) {
    auto fqn = op->getAttrOfType<StringAttr>("fqn");
    return fqn ? fqn.getValue() : StringRef();
  };
  if (Operation *def = value.getDefiningOp())
    return fqnOf(def);
  Operation *first = nullptr;
  for (Operation *user : value.getUsers())
    if (!fqnOf(user).empty() && (!first || user->isBeforeInBlock(first)))
      first = user;
  return first ? fqnOf(first) : StringRef();
}

LogicalResult kiln::verifyModulePath(Operation *op) {
  auto fqn = op->getAttrOfType<StringAttr>("fqn");
  if (!fqn || fqn.getValue().empty())
    return op->emitOpError() << "needs a non-empty 'fqn' (its module path, e.g. "
                                "\"layers.0.attention.wq\")";
  return success();
}

SmallVector<OpOperand *> kiln::parameterUses(Value param) {
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : param.getUses()) {
    if (auto cast = dyn_cast<CastOp>(use.getOwner()))
      llvm::append_range(uses, parameterUses(cast.getResult()));
    else
      uses.push_back(&use);
  }
  return uses;
}

std::string kiln::parameterPath(Value param) {
  std::string path = owningModule(param).str();
  for (OpOperand *use : parameterUses(param)) {
    // The stacks of a grouped experts op, or of a kernel call in its place
    // (the same operands: x, weights, ids, w1, w3, w2).
    Operation *user = use->getOwner();
    auto call = dyn_cast<KernelOp>(user);
    if (!isa<GroupedExpertsOp>(user) &&
        !(call && call.getTarget() == GroupedExpertsOp::getOperationName()))
      continue;
    switch (use->getOperandNumber()) {
    case 3:
      return path + ".w1";
    case 4:
      return path + ".w3";
    case 5:
      return path + ".w2";
    }
  }
  return path;
}

#include "kiln/Dialect/Kiln/IR/KilnInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<EmbeddingOp>(
          loc, fqn, {{"table", adaptor.getTable(), 2, Elt::Float},
                     {"ids", adaptor.getIds(), -1, Elt::Id}})))
    return failure();
  auto ids = rankedType(adaptor.getIds());
  auto table = rankedType(adaptor.getTable());
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(withShape(table, shape));
  return success();
}

LogicalResult EmbeddingOp::verify() { return verifyVocabAxes(*this, getVocabAxes()); }

double EmbeddingOp::getFlops() { return 0; }
// Only the gathered rows of the table are read.
int64_t EmbeddingOp::getBytesRead() {
  return tensorBytes(getIds().getType()) + tensorBytes(getResult().getType());
}

//===----------------------------------------------------------------------===//
// RmsNormOp
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<RmsNormOp>(
          loc, fqn, {{"input", adaptor.getInput(), -1, Elt::Float},
                     {"weight", adaptor.getWeight(), 1, Elt::Float}})))
    return failure();
  auto input = rankedType(adaptor.getInput());
  auto weight = rankedType(adaptor.getWeight());
  if (weight.getDimSize(0) != input.getShape().back())
    return shapeError<RmsNormOp>(loc, fqn, "weight ", weight,
                                 " must match the normalized (last) dimension of ",
                                 input);
  types.push_back(input);
  return success();
}

LogicalResult RmsNormOp::verify() {
  float eps = getEps().convertToFloat();
  if (!(eps > 0.0f) || !std::isfinite(eps))
    return emitOpError() << "(fqn '" << getFqn() << "'): eps must be finite and positive, got "
                         << eps;
  return success();
}

double RmsNormOp::getFlops() {
  return 4.0 * getInput().getType().getNumElements();
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<LinearOp>(
          loc, fqn, {{"input", adaptor.getInput(), -1, Elt::Float},
                     {"weight", adaptor.getWeight(), 2, Elt::Float}})))
    return failure();
  auto input = rankedType(adaptor.getInput());
  auto weight = rankedType(adaptor.getWeight());
  if (weight.getDimSize(1) != input.getShape().back())
    return shapeError<LinearOp>(loc, fqn, "weight ", weight,
                                " must be [out, in] with in = ",
                                input.getShape().back(), " (the last dimension of ",
                                input, ")");
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = weight.getDimSize(0);
  types.push_back(withShape(input, shape));
  return success();
}

double LinearOp::getFlops() {
  auto weight = getWeight().getType();
  return 2.0 * leadingElements(getInput().getType()) * weight.getNumElements();
}

// As kernels::linear: out[rows, out] = x[rows, in] weight[out, in]^T.
void LinearOp::getGemms(SmallVectorImpl<GemmShape> &gemms) {
  auto weight = getWeight().getType();
  gemms.push_back({leadingElements(getInput().getType()), weight.getDimSize(0),
                   weight.getDimSize(1), false, true});
}

//===----------------------------------------------------------------------===//
// RopeCacheOp
//===----------------------------------------------------------------------===//

LogicalResult RopeCacheOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  int64_t seq = int64_t(adaptor.getSeqLen()), headDim = int64_t(adaptor.getHeadDim());
  if (seq <= 0)
    return shapeError<RopeCacheOp>(loc, fqn, "seq_len must be positive, got ", seq);
  if (headDim <= 0 || headDim % 2)
    return shapeError<RopeCacheOp>(loc, fqn,
                                   "head_dim must be positive and even, got ", headDim);
  if (!(adaptor.getTheta().convertToDouble() > 0))
    return shapeError<RopeCacheOp>(loc, fqn, "theta must be positive");
  if (auto scaling = adaptor.getLlama3ScalingAttr()) {
    ArrayRef<double> s = scaling.asArrayRef();
    if (s.size() != 4 || !(s[0] > 0) || !(s[1] > 0) || !(s[2] > s[1]) || !(s[3] >= 1))
      return shapeError<RopeCacheOp>(
          loc, fqn,
          "llama3_scaling must be [factor > 0, low_freq_factor > 0, high_freq_factor > "
          "low_freq_factor, original_max_position_embeddings >= 1]");
  }
  if (auto chunks = adaptor.getHeadTailChunks();
      chunks && !SequenceLayout::validChunks(int64_t(*chunks), seq))
    return shapeError<RopeCacheOp>(loc, fqn, "head_tail_chunks = ", *chunks,
                                   " must be even (2 x the context-parallel degree) and divide "
                                   "seq_len (",
                                   seq, ")");
  types.push_back(RankedTensorType::get({seq, 2 * headDim}, Float32Type::get(context)));
  return success();
}

std::vector<float> RopeCacheOp::getInverseFrequencies() {
  double theta = getTheta().convertToDouble();
  std::optional<ArrayRef<double>> s = getLlama3Scaling();
  if (!s)
    return ropeInverseFrequencies(theta, int64_t(getHeadDim()));
  Llama3RopeScaling scaling{(*s)[0], (*s)[1], (*s)[2], int64_t((*s)[3])};
  return ropeInverseFrequencies(theta, int64_t(getHeadDim()), &scaling);
}

double RopeCacheOp::getFlops() { return 2.0 * getSeqLen() * getHeadDim(); }

//===----------------------------------------------------------------------===//
// RopeOp
//===----------------------------------------------------------------------===//

LogicalResult RopeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  return inferRopeTypes<RopeOp>(loc, adaptor.getFqn(), "q", adaptor.getQ(), "k",
                                adaptor.getK(), adaptor.getCache(), types);
}

double RopeOp::getFlops() {
  return 3.0 * (getQ().getType().getNumElements() + getK().getType().getNumElements());
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkAttentionOperands<AttentionOp>(loc, fqn, adaptor.getQ(), adaptor.getK(),
                                                 adaptor.getV(), adaptor.getScale())))
    return failure();
  auto q = rankedType(adaptor.getQ());
  types.push_back(q);
  types.push_back(lseType(context, q));
  return success();
}

LogicalResult kiln::detail::verifyAttentionLayout(Operation *op, TypedValue<RankedTensorType> q,
                                                  TypedValue<RankedTensorType> k,
                                                  std::optional<ArrayRef<int16_t>> queryAxes,
                                                  std::optional<uint64_t> headTailChunks) {
  auto error = [op] {
    return op->emitOpError() << "(fqn '" << op->getAttrOfType<StringAttr>("fqn").getValue()
                             << "'): ";
  };
  if (failed(verifyGridAxes(op, queryAxes, "query_axes")))
    return failure();
  int64_t queries = q.getType().getDimSize(1), seq = k.getType().getDimSize(1);
  if ((!queryAxes || queryAxes->empty()) && queries != seq)
    return error() << "q's sequence (" << queries << ") is a block of k's (" << seq
                   << ") but 'query_axes' does not say which ranks split it";
  if (headTailChunks && !SequenceLayout::validChunks(int64_t(*headTailChunks), seq))
    return error() << "head_tail_chunks = " << *headTailChunks
                   << " must be even (2 x the context-parallel degree) and divide the sequence ("
                   << seq << ")";
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttentionLayout(*this, getQ(), getK(), getQueryAxes(), getHeadTailChunks());
}

double AttentionOp::getFlops() {
  auto q = getQ().getType();
  return attentionFlops(q.getDimSize(0), getK().getType().getDimSize(1), q.getDimSize(2),
                        q.getDimSize(3), getCausal(), /*backward=*/false, q.getDimSize(1));
}

double kiln::attentionFlops(int64_t batch, int64_t seq, int64_t heads, int64_t headDim, bool causal,
                            bool backward, int64_t queries) {
  // Per scored pair, forward: q.k and p*v (2 * head_dim multiply-adds) plus
  // ~5 for scale, max, exp, sum and normalize. Backward: recompute q.k, then
  // dP = dO.v, dV += p dO, dQ += dS k, dK += dS q (5 * 2 * head_dim) plus
  // ~8 elementwise.
  return double(batch) * heads * scoredPairs(seq, causal, queries) *
         (backward ? 10.0 * headDim + 8 : 4.0 * headDim + 5);
}

//===----------------------------------------------------------------------===//
// Elementwise: SwigluOp, AddOp
//===----------------------------------------------------------------------===//

double SwigluOp::getFlops() { return 5.0 * getGate().getType().getNumElements(); }

double AddOp::getFlops() { return double(getLhs().getType().getNumElements()); }
std::optional<unsigned> AddOp::getTiedOperand(unsigned) { return 0; }

// CastOp: one rounding per element.
double CastOp::getFlops() { return double(getInput().getType().getNumElements()); }

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<CrossEntropyOp>(
          loc, fqn, {{"logits", adaptor.getLogits(), -1, Elt::Float},
                     {"labels", adaptor.getLabels(), -1, Elt::Id}})))
    return failure();
  if (failed(checkLogitRows<CrossEntropyOp>(loc, fqn, "labels", rankedType(adaptor.getLabels()),
                                            rankedType(adaptor.getLogits()))))
    return failure();
  types.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

double CrossEntropyOp::getFlops() {
  return 3.0 * getLogits().getType().getNumElements();
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  auto input = rankedType(adaptor.getInput());
  if (!input || !input.hasStaticShape())
    return shapeError<ReshapeOp>(loc, fqn, "input must have a static shape");
  ArrayRef<int64_t> shape = adaptor.getShape();
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return shapeError<ReshapeOp>(loc, fqn, "target dimensions must be static and "
                                             "non-negative");
    if (llvm::MulOverflow(count, dim, count))
      return shapeError<ReshapeOp>(loc, fqn, "target shape has more elements than an int64 "
                                             "counts");
  }
  if (count != input.getNumElements())
    return shapeError<ReshapeOp>(loc, fqn, "cannot reshape ", input, " (",
                                 input.getNumElements(), " elements) to ", count,
                                 " elements");
  types.push_back(withShape(input, shape));
  return success();
}

// A reshape of a row-major tensor is a view: no work, no traffic.
double ReshapeOp::getFlops() { return 0; }
int64_t ReshapeOp::getBytesRead() { return 0; }
int64_t ReshapeOp::getBytesWritten() { return 0; }
Value ReshapeOp::getViewSource() { return getInput(); }

//===----------------------------------------------------------------------===//
// PadOp, NarrowOp
//===----------------------------------------------------------------------===//

namespace {
/// pad (grow = true) and narrow: dimension `dim` becomes `size`.
template <typename OpT>
LogicalResult inferResized(std::optional<Location> loc, StringRef fqn, Value input,
                           int64_t dim, int64_t size, bool grow,
                           SmallVectorImpl<Type> &types) {
  if (failed(checkOperands<OpT>(loc, fqn, {{"input", input, -1, Elt::Float}})))
    return failure();
  auto type = rankedType(input);
  if (dim < 0 || dim >= type.getRank())
    return shapeError<OpT>(loc, fqn, "dim ", dim, " is outside ", type);
  int64_t current = type.getDimSize(dim);
  if (grow ? size < current : (size <= 0 || size > current))
    return shapeError<OpT>(loc, fqn, "size ", size, grow ? " must be at least " : " must be in [1, ",
                           current, grow ? "" : "]", " (dimension ", dim, " of ", type, ")");
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size;
  types.push_back(withShape(type, shape));
  return success();
}
} // namespace

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferResized<PadOp>(loc, adaptor.getFqn(), adaptor.getInput(),
                             int64_t(adaptor.getDim()), int64_t(adaptor.getSize()), true, types);
}
double PadOp::getFlops() { return 0; }

LogicalResult NarrowOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferResized<NarrowOp>(loc, adaptor.getFqn(), adaptor.getInput(),
                                int64_t(adaptor.getDim()), int64_t(adaptor.getSize()), false,
                                types);
}
double NarrowOp::getFlops() { return 0; }

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"
