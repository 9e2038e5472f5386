//===- HloRankArrays.cpp - Whole tensors and ranks' HLO arrays ------------===//

#include "kiln/Driver/HloRankArrays.h"
#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"
#include "kiln/Driver/HloKernelCall.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Support/Error.h"

#include <algorithm>
#include <cmath>

using json = nlohmann::json;

namespace kiln {

using neuron::HloArray;

neuron::HloArray arrayOf(const Tensor &t) {
  HloArray a;
  a.dims.assign(t.shape().begin(), t.shape().end());
  a.values.resize(size_t(t.numel()));
  if (t.dtype() == DType::I64) {
    a.type = xla::S64;
    for (int64_t i = 0; i < t.numel(); ++i)
      a.values[i] = double(t.data<int64_t>()[i]);
  } else if (t.dtype() == DType::I32) {
    a.type = xla::S32;
    for (int64_t i = 0; i < t.numel(); ++i)
      a.values[i] = double(t.data<int32_t>()[i]);
  } else {
    Tensor f = t.to(DType::F32);
    for (int64_t i = 0; i < t.numel(); ++i)
      a.values[i] = f.data<float>()[i];
  }
  return a;
}

Tensor tensorOf(const neuron::HloArray &a) {
  Shape shape(a.dims.begin(), a.dims.end());
  if (a.type == xla::S64 || a.type == xla::S32) {
    Tensor t(a.type == xla::S64 ? DType::I64 : DType::I32, shape);
    for (int64_t i = 0; i < a.size(); ++i) {
      if (a.type == xla::S64)
        t.mutableData<int64_t>()[i] = int64_t(a.values[i]);
      else
        t.mutableData<int32_t>()[i] = int32_t(a.values[i]);
    }
    return t;
  }
  Tensor t(DType::F32, shape);
  for (int64_t i = 0; i < a.size(); ++i)
    t.mutableData<float>()[i] = float(a.values[i]);
  return t;
}

neuron::HloCustomCall kernelCalls(mlir::MLIRContext &context) {
  return [&context](const xla::HloInstructionProto &inst, const std::vector<const HloArray *> &in) {
    HloKernelCall call =
        HloKernelCall::parse("check-hlo: " + inst.name(), inst.backend_config(), context);
    std::vector<Tensor> operands;
    for (const HloArray *a : in)
      operands.push_back(tensorOf(*a));
    std::vector<HloArray> out;
    for (const Tensor &t : call.run(std::move(operands)))
      out.push_back(arrayOf(t));
    return out;
  };
}

neuron::HloArray zeros(const std::vector<int64_t> &dims, xla::PrimitiveType type) {
  HloArray a;
  a.type = type;
  a.dims = dims;
  a.values.assign(size_t(a.size()), 0.0);
  return a;
}

std::vector<int64_t> blockOffset(const json &param, const std::vector<int64_t> &grid,
                                 const std::vector<std::string> &axisNames, int64_t rank) {
  std::vector<int64_t> offset(param["shape"].size(), 0);
  for (const json &s : param["split"]) {
    llvm::SmallVector<int16_t> axes;
    for (const json &a : s["axes"])
      axes.push_back(int16_t(std::find(axisNames.begin(), axisNames.end(), a.get<std::string>()) -
                             axisNames.begin()));
    offset[s["dim"].get<int64_t>()] =
        hlo::gridGroupIndex(grid, axes, rank) * s["block"].get<int64_t>();
  }
  return offset;
}

neuron::HloArray sliceFor(const neuron::HloArray &whole, const json &param,
                          const std::vector<int64_t> &grid,
                          const std::vector<std::string> &axisNames, int64_t rank) {
  HloArray part = zeros(param["shape"].get<std::vector<int64_t>>(), whole.type);
  // Outside the whole tensor: the zero padding of an uneven shard.
  forBlock(whole.dims, part.dims, blockOffset(param, grid, axisNames, rank),
           [&](int64_t p, int64_t w) { part.values[p] = w < 0 ? 0.0 : whole.values[w]; });
  return part;
}

HloArray wholeFromBlocks(const json &param, const std::vector<std::vector<HloArray>> &results,
                         int64_t index, int64_t firstRank, int64_t endRank,
                         const std::vector<int64_t> &grid,
                         const std::vector<std::string> &axisNames) {
  HloArray whole = zeros(param["whole_shape"].get<std::vector<int64_t>>(), xla::F32);
  for (int64_t r = firstRank; r < endRank; ++r)
    forBlock(whole.dims, results[r][index].dims, blockOffset(param, grid, axisNames, r),
             [&](int64_t part, int64_t w) {
               if (w >= 0)
                 whole.values[w] = results[r][index].values[part];
             });
  return whole;
}

double maxAbsDiff(const neuron::HloArray &a, const Tensor &b) {
  Tensor f = b.to(DType::F32);
  double m = 0;
  for (int64_t i = 0; i < f.numel(); ++i)
    m = std::max(m, std::fabs(a.values[i] - double(f.data<float>()[i])));
  return m;
}

Tensor paramByKey(const TensorMap &params, const std::string &key, int64_t members) {
  auto at = [&](const std::string &k) -> const Tensor & {
    auto it = params.find(k);
    if (it == params.end())
      fail("check-hlo: the manifest's parameter '{}' is not a parameter of the model", k);
    return it->second;
  };
  if (!isStackedKey(key))
    return at(key);
  std::vector<Tensor> stack;
  for (int64_t i = 0; i < members; ++i)
    stack.push_back(at(stackMemberKey(key, i)));
  return stackTensors(stack);
}

} // namespace kiln
