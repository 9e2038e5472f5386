//===- HloRankArrays.h - Whole tensors and ranks' HLO arrays -----*- C++ -*-===//
//
// kiln check-hlo feeds a module as a launcher on a trn2 must: each rank's
// block of every whole tensor, as the manifest's "split" says (rank r holds,
// along each split dimension, block gridGroupIndex(r, axes), zero-padded
// past an uneven shard's end), and puts results back together the same way.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_HLORANKARRAYS_H
#define KILN_DRIVER_HLORANKARRAYS_H

#include "kiln/Backend/Neuron/HloEvaluator.h"
#include "kiln/Runtime/SafeTensors.h"

#include "mlir/IR/MLIRContext.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// `t` as an HLO array (s64, s32 or f32 values) and back.
neuron::HloArray arrayOf(const Tensor &t);
Tensor tensorOf(const neuron::HloArray &a);
/// An array of `dims` zeros of `type`.
neuron::HloArray zeros(const std::vector<int64_t> &dims, xla::PrimitiveType type);

/// Custom calls run the CPU implementation of the kernel their
/// backend_config names (HloKernelCall).
neuron::HloCustomCall kernelCalls(mlir::MLIRContext &context);

/// Calls fn(outIndexFlat, inIndexFlat) for the block of `part` dims at
/// `offset` within `whole` dims.
template <typename Fn>
void forBlock(const std::vector<int64_t> &whole, const std::vector<int64_t> &part,
              const std::vector<int64_t> &offset, Fn fn) {
  std::vector<int64_t> idx(part.size(), 0), strides(whole.size(), 1);
  for (int64_t d = int64_t(whole.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * whole[d + 1];
  int64_t n = 1;
  for (int64_t p : part)
    n *= p;
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t o = 0;
    bool inside = true;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t at = offset[d] + idx[d];
      inside &= at < whole[d];
      o += at * strides[d];
    }
    fn(flat, inside ? o : -1);
    for (int64_t d = int64_t(part.size()) - 1; d >= 0; --d) {
      if (++idx[d] < part[d])
        break;
      idx[d] = 0;
    }
  }
}

/// Where rank `rank`'s block of manifest parameter `param` starts in the
/// whole tensor, on a grid of `grid` sizes named `axisNames`.
std::vector<int64_t> blockOffset(const nlohmann::json &param, const std::vector<int64_t> &grid,
                                 const std::vector<std::string> &axisNames, int64_t rank);
/// Rank `rank`'s block of `whole` as manifest parameter `param` is split.
neuron::HloArray sliceFor(const neuron::HloArray &whole, const nlohmann::json &param,
                          const std::vector<int64_t> &grid,
                          const std::vector<std::string> &axisNames, int64_t rank);
/// The whole tensor of manifest parameter `param` put back together from
/// result `index` of ranks [firstRank, endRank) of `results` (each rank's
/// results), each holding its block as `param` is split.
neuron::HloArray wholeFromBlocks(const nlohmann::json &param,
                                 const std::vector<std::vector<neuron::HloArray>> &results,
                                 int64_t index, int64_t firstRank, int64_t endRank,
                                 const std::vector<int64_t> &grid,
                                 const std::vector<std::string> &axisNames);
/// The largest element-wise |a - b|.
double maxAbsDiff(const neuron::HloArray &a, const Tensor &b);
/// The tensor of parameter `key` in `params` (HF keys): a stacked key's
/// `members` (a MoE layer's experts, kept one tensor each) stacked.
Tensor paramByKey(const TensorMap &params, const std::string &key, int64_t members);

} // namespace kiln

#endif // KILN_DRIVER_HLORANKARRAYS_H
