//===- HloKernelCall.cpp - An HLO custom call run by its CPU kernel -------===//

#include "kiln/Driver/HloKernelCall.h"
#include "kiln/Backend/CPU/CpuKernelImpl.h"
#include "kiln/Dialect/Kiln/IR/KernelSpec.h"
#include "kiln/Runtime/BlockwiseMoe.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include "mlir/AsmParser/AsmParser.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace kiln {
namespace {

/// The integers of `list` (a JSON array of integers), or an error naming it.
std::vector<int64_t> integers(const nlohmann::json &list, const std::string &what) {
  if (!list.is_array())
    fail("{} is not a list of integers", what);
  std::vector<int64_t> out;
  for (const nlohmann::json &v : list) {
    if (!isInt64(v))
      fail("{} holds {}, not an integer", what, briefJson(v));
    out.push_back(v.get<int64_t>());
  }
  return out;
}

size_t index(const nlohmann::json &v, const std::string &what) {
  if (!isInt64(v) || v.get<int64_t>() < 0)
    fail("{} is {}, not an index", what, briefJson(v));
  return size_t(v.get<int64_t>());
}

NkiTensorLayout layoutOf(const nlohmann::json &layout, const std::string &where) {
  if (!layout.is_object())
    fail("{}: an NKI layout is not an object", where);
  NkiTensorLayout out;
  out.permutation =
      integers(layout.value("permutation", nlohmann::json::array()), where + " layout permutation");
  out.lseTiles = layout.value("lse_tiles", false);
  out.foldLeading = layout.value("fold_leading", false);
  return out;
}

} // namespace

Tensor HloKernelCall::toNkiLayout(const Tensor &t, const NkiTensorLayout &layout) {
  Tensor v = t;
  if (!layout.permutation.empty())
    v = kernels::transpose(v, layout.permutation);
  if (layout.lseTiles) {
    const Shape &s = v.shape();
    v = kernels::transpose(v.reshaped({s[0], s[1], s[2] / 128, 128}), {0, 1, 3, 2});
  }
  if (layout.foldLeading) {
    Shape s(v.shape().begin() + 1, v.shape().end());
    s[0] *= v.shape()[0];
    v = v.reshaped(s);
  }
  return v;
}

Tensor HloKernelCall::fromNkiLayout(const Tensor &t, const NkiTensorLayout &layout,
                                    const Shape &kilnShape) {
  Tensor v = layout.foldLeading ? t.reshaped(layout.tiled(kilnShape)) : t;
  if (layout.lseTiles)
    v = kernels::transpose(v, {0, 1, 3, 2}).reshaped(layout.permuted(kilnShape));
  if (!layout.permutation.empty())
    v = kernels::transpose(v, layout.inversePermutation());
  return v;
}

void HloKernelCall::readBinding(const nlohmann::json &nki) {
  std::string where = instruction + " backend_config nki";
  if (!nki.is_object() || !nki.contains("arguments") || !nki["arguments"].is_array())
    fail("{}: no arguments", where);
  bound = true;
  // The module is input: every layout is checked against the Kiln shape it
  // lays out before a tensor is moved by it.
  auto tensor = [&](const nlohmann::json &j, const std::string &what) {
    BoundTensor t;
    t.kilnShape = integers(j.at("kiln_shape"), where + " " + what + " kiln_shape");
    int64_t elements = 1;
    for (int64_t d : t.kilnShape) {
      if (d < 0 || d > (int64_t(1) << 40) || (d > 0 && elements > (int64_t(1) << 40) / d))
        fail("{}: {}'s Kiln shape {} is not the shape of a tensor", where, what,
             shapeToString(t.kilnShape));
      elements *= d;
    }
    t.layout = layoutOf(j.value("layout", nlohmann::json::object()), where);
    std::vector<int64_t> sorted = t.layout.permutation;
    std::sort(sorted.begin(), sorted.end());
    bool isPermutation = sorted.empty() || sorted.size() == t.kilnShape.size();
    for (size_t i = 0; isPermutation && i < sorted.size(); ++i)
      isPermutation = sorted[i] == int64_t(i);
    if (!isPermutation)
      fail("{}: {}'s permutation is not one of its {} dimensions", where, what, t.kilnShape.size());
    if ((t.layout.lseTiles || t.layout.foldLeading) && t.layout.apply(t.kilnShape).empty())
      fail("{}: {}'s layout does not fit its Kiln shape {}", where, what,
           shapeToString(t.kilnShape));
    return t;
  };
  try {
    if (nki.contains("routing")) {
      const nlohmann::json &size = nki["routing"].at("block_size");
      if (!isInt64(size) || size.get<int64_t>() <= 0 || size.get<int64_t>() > (int64_t(1) << 20))
        fail("{}: routing block_size is {}, not a block size", where, briefJson(size));
      blockSize = size.get<int64_t>();
    }
    for (const nlohmann::json &a : nki["arguments"]) {
      if (a.contains("routed")) {
        const nlohmann::json &word = a["routed"];
        std::optional<NkiRoutedTensor> routed =
            word.is_string() ? parseWord<NkiRoutedTensor>(word.get<std::string>()) : std::nullopt;
        if (!routed || !blockSize)
          fail("{}: argument {} is routed as {}, not a tensor of a routing ({})", where,
               a.value("name", "?"), briefJson(word), listWords<NkiRoutedTensor>());
        BoundTensor t;
        t.routed = routed;
        arguments.push_back(std::move(t));
        continue;
      }
      BoundTensor t = tensor(a, "argument " + a.value("name", "?"));
      t.kilnOperand = a.contains("kiln_operand");
      t.kilnIndex = index(a.at(t.kilnOperand ? "kiln_operand" : "output_of_result"),
                          where + (t.kilnOperand ? " kiln_operand" : " output_of_result"));
      if (t.kilnIndex >= nki["arguments"].size())
        fail("{}: argument {} names Kiln tensor {} of a call with {} arguments", where,
             arguments.size(), t.kilnIndex, nki["arguments"].size());
      arguments.push_back(std::move(t));
    }
    for (const nlohmann::json &r : nki.value("results", nlohmann::json::array())) {
      std::string what = "result " + std::to_string(results.size());
      nlohmann::json word = r.value("role", nlohmann::json("kiln_result"));
      std::optional<NkiResult::Role> role =
          word.is_string() ? parseWord<NkiResult::Role>(word.get<std::string>()) : std::nullopt;
      bool routedRole = role && *role >= NkiResult::Role::RoutedRows;
      if (!role || routedRole != blockSize.has_value())
        fail("{}: {}'s role is {}, not one of a {} call's ({})", where, what, briefJson(word),
             blockSize ? "blockwise MoE" : "bound", listWords<NkiResult::Role>());
      BoundTensor t;
      if (blockSize) {
        // The blockwise form's results are the function's own: no Kiln
        // tensor is laid out; a prologue's names the routed tensor it is.
        if (*role == NkiResult::Role::Routed) {
          nlohmann::json kind = r.value("routed", nlohmann::json());
          t.routed =
              kind.is_string() ? parseWord<NkiRoutedTensor>(kind.get<std::string>()) : std::nullopt;
          if (t.routed != NkiRoutedTensor::GateUpActivations &&
              t.routed != NkiRoutedTensor::DownActivations)
            fail("{}: {} is routed as {}, not a checkpoint (gate_up_activations, "
                 "down_activations)",
                 where, what, briefJson(kind));
        }
      } else {
        t = tensor(r, what);
        t.kilnIndex = index(r.at("kiln_result"), where + " kiln_result");
      }
      t.role = *role;
      results.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception &e) {
    fail("{}: {}", where, e.what());
  }
}

HloKernelCall HloKernelCall::parse(const std::string &instruction, const std::string &backendConfig,
                             mlir::MLIRContext &context) {
  nlohmann::json config = parseJson(backendConfig, instruction + " backend_config");
  if (!config.is_object())
    fail("{} backend_config is not a JSON object (Kiln's: kiln_kernel, kiln_direction, "
         "kiln_options)",
         instruction);
  HloKernelCall call;
  call.instruction = instruction;
  std::string kernel, optionsText, direction;
  try {
    kernel = config.value("kiln_kernel", "");
    optionsText = config.value("kiln_options", "{}");
    direction = config.value("kiln_direction", "");
  } catch (const nlohmann::json::exception &e) {
    fail("{} backend_config: {}", instruction, e.what());
  }
  call.impl = dynamic_cast<const CpuKernelImpl *>(lookupKernelSpec(kernel));
  if (!call.impl)
    fail("{} calls kernel '{}', which has no CPU implementation", instruction, kernel);
  call.options =
      llvm::dyn_cast_or_null<mlir::DictionaryAttr>(mlir::parseAttribute(optionsText, &context));
  if (!call.options)
    fail("{}: kiln_options is not an MLIR dictionary", instruction);
  call.backward = direction == "backward";
  if (config.contains("nki"))
    call.readBinding(config["nki"]);
  return call;
}

std::vector<Tensor> HloKernelCall::runBlockwise(const std::vector<Tensor> &operands) const {
  // One operand per routed argument, each kind once; nothing after them
  // (the routing consumed a block's first expert).
  std::vector<const Tensor *> byKind(ClosedSet<NkiRoutedTensor>::words.size(), nullptr);
  if (operands.size() != arguments.size())
    fail("{}: the call has {} operands, its NKI binding {} arguments", instruction, operands.size(),
         arguments.size());
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (!arguments[i].routed)
      fail("{}: argument {} of a call in the blockwise MoE form is not routed", instruction, i);
    byKind[size_t(*arguments[i].routed)] = &operands[i];
  }
  using R = NkiRoutedTensor;
  // The backward (blockwise_mm_bwd) takes the output's gradient and the
  // checkpoints; the forward (moe_cte) neither.
  bool isBackward = byKind[size_t(R::OutputGrad)] != nullptr;
  for (size_t k = 0; k < byKind.size(); ++k) {
    bool base = k <= size_t(R::BlockExperts);
    if (!byKind[k] && (base || isBackward))
      fail("{}: no argument of its NKI binding holds the routed {}", instruction, wordOf(R(k)));
    if (byKind[k] && !base && !isBackward)
      fail("{}: the forward of the blockwise MoE form takes no {}", instruction, wordOf(R(k)));
  }
  auto in = [&](R t) -> const Tensor & { return *byKind[size_t(t)]; };
  auto refuse = [&](const BoundTensor &r) {
    fail("{}: a {} of the blockwise MoE form has no result '{}'", instruction,
         isBackward ? "backward" : "forward", wordOf(r.role));
  };
  std::vector<Tensor> out;
  if (isBackward) {
    kernels::BlockwiseMoeGrads g = kernels::blockwiseMoeBackward(
        in(R::Hidden), in(R::Affinities), in(R::GateUpWeights), in(R::DownWeights),
        in(R::GateUpActivations), in(R::DownActivations), in(R::TokenPositions),
        in(R::BlockExperts), in(R::OutputGrad), *blockSize, instruction);
    using Role = NkiResult::Role;
    for (const BoundTensor &r : results) {
      const Tensor *t = r.role == Role::RoutedRows         ? &g.hidden
                        : r.role == Role::RoutedAffinities ? &g.affinities
                        : r.role == Role::GateUpWeights    ? &g.gateUp
                        : r.role == Role::DownWeights      ? &g.down
                                                           : nullptr;
      if (!t)
        refuse(r);
      out.push_back(*t);
    }
    return out;
  }
  bool checkpoint =
      llvm::any_of(results, [](const BoundTensor &r) { return r.role == NkiResult::Role::Routed; });
  kernels::BlockwiseMoeOutputs f = kernels::blockwiseMoe(
      in(R::Hidden), in(R::Affinities), in(R::GateUpWeights), in(R::DownWeights),
      in(R::TokenPositions), in(R::BlockExperts), *blockSize, checkpoint, instruction);
  for (const BoundTensor &r : results) {
    if (r.role == NkiResult::Role::RoutedRows || r.role == NkiResult::Role::Discarded)
      out.push_back(f.out);
    else if (r.role == NkiResult::Role::Routed)
      out.push_back(r.routed == R::GateUpActivations ? f.gateUpActivations : f.downActivations);
    else
      refuse(r);
  }
  return out;
}

std::vector<Tensor> HloKernelCall::run(std::vector<Tensor> operands) const {
  if (blockSize)
    return runBlockwise(operands);
  if (bound) {
    // Kiln's operands back from the function's arguments; operands after
    // the arguments (a block's first row) follow them as they are.
    if (operands.size() < arguments.size())
      fail("{}: the call has {} operands, its NKI binding {} arguments", instruction,
           operands.size(), arguments.size());
    std::vector<Tensor> own;
    std::vector<bool> held;
    for (size_t i = 0; i < arguments.size(); ++i) {
      const BoundTensor &a = arguments[i];
      if (!a.kilnOperand)
        continue;
      std::vector<int64_t> want = a.layout.apply(a.kilnShape);
      if (operands[i].shape() != want)
        fail("{}: operand {} is {}, its NKI binding lays out {} as {}", instruction, i,
             shapeToString(operands[i].shape()), shapeToString(a.kilnShape), shapeToString(want));
      if (own.size() <= a.kilnIndex) {
        own.resize(a.kilnIndex + 1);
        held.resize(a.kilnIndex + 1);
      }
      own[a.kilnIndex] = fromNkiLayout(operands[i], a.layout, a.kilnShape);
      held[a.kilnIndex] = true;
    }
    for (size_t k = 0; k < held.size(); ++k)
      if (!held[k])
        fail("{}: no argument of its NKI binding holds Kiln operand {}", instruction, k);
    own.insert(own.end(), operands.begin() + std::ptrdiff_t(arguments.size()), operands.end());
    operands = std::move(own);
  }
  llvm::SmallVector<Tensor> results;
  if (backward)
    impl->runBackward(options, operands, results);
  else
    impl->runForward(options, operands, results);
  if (!bound || this->results.empty())
    return std::vector<Tensor>(results.begin(), results.end());
  // The function's results from Kiln's. Its softmax statistics are given
  // as (neg_max, sum_recip) = (-lse, 1): the pair the lowering turns back
  // into the same log-sum-exp (a real kernel's max and sum give it too).
  std::vector<Tensor> out;
  for (const BoundTensor &r : this->results) {
    if (r.kilnIndex >= results.size() || results[r.kilnIndex].shape() != r.kilnShape)
      fail("{}: the NKI binding's result {} is Kiln result {} of shape {}, which the kernel "
           "does not return",
           instruction, out.size(), r.kilnIndex, shapeToString(r.kilnShape));
    const Tensor &kiln = results[r.kilnIndex];
    Tensor value = kiln;
    if (r.role != NkiResult::Role::KilnResult) {
      Tensor lse = kiln.dtype() == DType::F32 ? kiln : kiln.to(DType::F32);
      value = Tensor::uninitialized(DType::F32, lse.shape());
      float *v = value.mutableData<float>();
      const float *l = lse.data<float>();
      for (int64_t i = 0; i < lse.numel(); ++i)
        v[i] = r.role == NkiResult::Role::NegMax ? -l[i] : 1.0f;
    }
    out.push_back(toNkiLayout(value, r.layout));
  }
  return out;
}

} // namespace kiln
