//===- ContractionToBlas.cpp - float32 dot_general -> the host's sgemm -----===//
//
// A float32 dot_general of the matmul form becomes a call of the host's
// kiln_sgemm (kiln/Passes/HloToLinalg/HostCalls.h): OpenBLAS instead of a
// naive loop nest, a hundred times faster. The form: batch dimensions
// leading and in order on both sides; on each side the contracting
// dimensions contiguous and either right after the batch dimensions (the
// operand is stored transposed) or last, so that every operand is a
// row-major [m, k] or [k, m] (lhs), [k, n] or [n, k] (rhs) matrix per batch
// with no copy. The linear layers' forward and both gradients have it;
// other dots (attention's, whose batch dimensions are not leading) and
// dots of other element types stay linalg (ContractionToLinalg.cpp).
//
//===----------------------------------------------------------------------===//

#include "HloToLinalg.h"
#include "kiln/Passes/HloToLinalg/HostCalls.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::hlo_to_linalg;

namespace {

/// One operand as a matrix per batch: its free extent, the contracting
/// extent and whether the contracting dimensions come first.
struct MatrixForm {
  int64_t free = 1, contracting = 1;
  bool contractingFirst = false;
};

std::optional<MatrixForm> matrixForm(RankedTensorType type, ArrayRef<int64_t> batching,
                                     ArrayRef<int64_t> contracting) {
  int64_t batch = batching.size(), rank = type.getRank();
  for (int64_t i = 0; i < batch; ++i)
    if (batching[i] != i)
      return std::nullopt;
  SmallVector<int64_t> sorted(contracting);
  llvm::sort(sorted);
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] != sorted[i - 1] + 1)
      return std::nullopt;
  if (sorted.empty())
    return std::nullopt;
  MatrixForm form;
  if (sorted.front() == batch)
    form.contractingFirst = true;
  else if (sorted.back() != rank - 1)
    return std::nullopt;
  // The contracting dimensions in the operand's order (k is row-major over them).
  if (ArrayRef<int64_t>(contracting) != ArrayRef<int64_t>(sorted))
    return std::nullopt;
  for (int64_t d = batch; d < rank; ++d)
    (llvm::is_contained(sorted, d) ? form.contracting : form.free) *= type.getDimSize(d);
  return form;
}

bool batchesAgree(RankedTensorType lhs, RankedTensorType rhs, int64_t batch) {
  for (int64_t d = 0; d < batch; ++d)
    if (lhs.getDimSize(d) != rhs.getDimSize(d))
      return false;
  return true;
}

/// The sgemm table words of `op`, or nothing when it has another form.
std::optional<SmallVector<int64_t>> sgemmWords(hlo::DotGeneralOp op) {
  auto lhs = cast<RankedTensorType>(op.getLhs().getType());
  auto rhs = cast<RankedTensorType>(op.getRhs().getType());
  auto result = cast<RankedTensorType>(op.getType());
  if (!lhs.getElementType().isF32() || !rhs.getElementType().isF32() ||
      !result.getElementType().isF32())
    return std::nullopt;
  std::optional<MatrixForm> a = matrixForm(lhs, op.getLhsBatchingDimensions(),
                                           op.getLhsContractingDimensions());
  std::optional<MatrixForm> b = matrixForm(rhs, op.getRhsBatchingDimensions(),
                                           op.getRhsContractingDimensions());
  int64_t batch = op.getLhsBatchingDimensions().size();
  if (!a || !b || !batchesAgree(lhs, rhs, batch))
    return std::nullopt;
  int64_t batches = 1;
  for (int64_t d = 0; d < batch; ++d)
    batches *= lhs.getDimSize(d);
  // lhs [k, m] is A transposed; rhs [k, n] is B as sgemm takes it.
  return SmallVector<int64_t>{batches,      a->free, b->free, a->contracting,
                              a->contractingFirst, !b->contractingFirst};
}

struct DotGeneralToSgemm : OpConversionPattern<hlo::DotGeneralOp> {
  DotGeneralToSgemm(const TypeConverter &converter, MLIRContext *context)
      : OpConversionPattern(converter, context, /*benefit=*/2) {}
  LogicalResult matchAndRewrite(hlo::DotGeneralOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<SmallVector<int64_t>> words = sgemmWords(op);
    if (!words)
      return rewriter.notifyMatchFailure(op, "not of the matmul form");
    rewriter.replaceOp(op, callHost(rewriter, op.getLoc(), kSgemmFunction, {}, *words,
                                    {adaptor.getLhs(), adaptor.getRhs()}, {op.getType()}));
    return success();
  }
};

} // namespace

void kiln::hlo_to_linalg::declareBlasFunctions(ModuleOp module) {
  bool any = false;
  module.walk([&](hlo::DotGeneralOp op) { any |= sgemmWords(op).has_value(); });
  if (any)
    declareHostFunction(module, kSgemmFunction, 0);
}

void kiln::hlo_to_linalg::populateBlasPatterns(const TypeConverter &converter,
                                               RewritePatternSet &patterns) {
  patterns.add<DotGeneralToSgemm>(converter, patterns.getContext());
}
