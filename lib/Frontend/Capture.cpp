//===- Capture.cpp - Qwen3 -> kiln dialect --------------------------------===//

#include "kiln/Frontend/Capture.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Frontend/Qwen3Naming.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

using namespace mlir;

namespace kiln {

void loadKilnDialects(MLIRContext &context) {
  context.loadDialect<KilnDialect, func::FuncDialect>();
}

namespace {

/// Emits one Qwen3 model body into a function whose arguments are bound.
class Qwen3Builder {
public:
  Qwen3Builder(OpBuilder &b, const Qwen3Config &c, int64_t batch, int64_t seq,
               std::map<std::string, Value> params)
      : b(b), c(c), batch(batch), seq(seq), params(std::move(params)) {}

  /// The router outputs of each sparse layer, for the load-balancing loss.
  SmallVector<Value> routerProbs, routerExperts;

  /// ids [b, s] -> logits [b, s, vocab]
  Value logits(Value ids) {
    Value h = EmbeddingOp::create(b, loc("tok_embeddings"), param("tok_embeddings"),
                                  ids, fqn("tok_embeddings"), nullptr);
    DenseF64ArrayAttr scaling;
    if (c.hasRopeScaling())
      scaling = b.getDenseF64ArrayAttr(
          {c.ropeScaling.factor, c.ropeScaling.lowFreqFactor, c.ropeScaling.highFreqFactor,
           double(c.ropeScaling.originalMaxPositionEmbeddings)});
    Value cache = RopeCacheOp::create(b, loc("rope_cache"), b.getF64FloatAttr(c.ropeTheta),
                                      b.getI64IntegerAttr(seq), b.getI64IntegerAttr(c.headDim),
                                      fqn("rope_cache"), scaling, IntegerAttr());
    for (int64_t layer = 0; layer < c.numLayers; ++layer)
      h = block("layers." + std::to_string(layer) + ".", h, cache, c.isSparseLayer(layer));
    h = norm("norm", h);
    Value out = param(c.tieWordEmbeddings ? "tok_embeddings" : "output");
    return LinearOp::create(b, loc("output"), h, out, fqn("output"));
  }

  /// loss + router_aux_loss_coef * load-balancing loss over the sparse layers,
  /// as HF's Qwen3MoeForCausalLM with output_router_logits.
  /// Returns (that sum, the unscaled load-balancing loss).
  std::pair<Value, Value> withAuxLoss(Value loss) {
    Value aux = LoadBalancingLossOp::create(b, loc("aux_loss"), routerProbs, routerExperts,
                                            fqn("aux_loss"));
    Value scaled = ScaleOp::create(b, loc("aux_loss.scaled"), aux,
                                   b.getF64FloatAttr(c.routerAuxLossCoef),
                                   fqn("aux_loss.scaled"));
    return {add("loss.with_aux", loss, scaled), aux};
  }

private:
  Value block(const std::string &p, Value h, Value cache, bool sparse) {
    Value x = norm(p + "attention_norm", h);
    Value q = heads(p + "attention.q_heads", linear(p + "attention.wq", x), c.numHeads);
    Value k = heads(p + "attention.k_heads", linear(p + "attention.wk", x), c.numKvHeads);
    Value v = heads(p + "attention.v_heads", linear(p + "attention.wv", x), c.numKvHeads);
    if (c.hasQkNorm()) {
      q = norm(p + "attention.q_norm", q);
      k = norm(p + "attention.k_norm", k);
    }
    std::string ropeName = p + "attention.rope";
    auto rope = RopeOp::create(b, loc(ropeName), q, k, cache, fqn(ropeName));
    std::string attnName = p + "attention.inner_attention";
    auto attn =
        AttentionOp::create(b, loc(attnName), rope.getQOut(), rope.getKOut(), v, b.getUnitAttr(),
                            b.getF32FloatAttr(float(1.0 / std::sqrt(double(c.headDim)))),
                            fqn(attnName), DenseI16ArrayAttr(), IntegerAttr());
    Value merged = reshape(p + "attention.merge_heads", attn.getOut(),
                           {batch, seq, c.numHeads * c.headDim});
    h = add(p + "attention_residual", h, linear(p + "attention.wo", merged));
    x = norm(p + "ffn_norm", h);
    if (sparse)
      return add(p + "ffn_residual", h, moe(p + "moe.", x));
    // Separate statements keep the emitted op order (w1, w3) deterministic.
    Value gate = linear(p + "feed_forward.w1", x);
    Value up = linear(p + "feed_forward.w3", x);
    std::string actName = p + "feed_forward.swiglu";
    Value act = SwigluOp::create(b, loc(actName), gate, up, fqn(actName));
    return add(p + "ffn_residual", h, linear(p + "feed_forward.w2", act));
  }

  /// Qwen3-MoE's sparse MLP: the router's gate linear, top-k routing, the
  /// routed experts.
  Value moe(const std::string &p, Value x) {
    std::string routerName = p + "router";
    auto router = RouterOp::create(b, loc(routerName), linear(routerName + ".gate", x),
                                   /*expert_bias=*/Value(), b.getI64IntegerAttr(c.numExpertsPerTok),
                                   c.normTopkProb ? b.getUnitAttr() : UnitAttr(),
                                   fqn(routerName));
    routerProbs.push_back(router.getProbs());
    routerExperts.push_back(router.getExperts());
    std::string experts = p + "experts";
    return GroupedExpertsOp::create(b, loc(experts), x, router.getWeights(),
                                    router.getExperts(), param(experts + ".w1"),
                                    param(experts + ".w3"), param(experts + ".w2"),
                                    fqn(experts), /*expert_axes=*/nullptr,
                                    /*num_experts=*/nullptr, /*blocked=*/nullptr,
                                    /*round_to=*/nullptr);
  }

  Value norm(const std::string &module, Value x) {
    return RmsNormOp::create(b, loc(module), x, param(module),
                             b.getF32FloatAttr(float(c.rmsNormEps)), fqn(module));
  }
  Value linear(const std::string &module, Value x) {
    return LinearOp::create(b, loc(module), x, param(module), fqn(module));
  }
  Value add(const std::string &name, Value lhs, Value rhs) {
    return AddOp::create(b, loc(name), lhs, rhs, fqn(name));
  }
  Value reshape(const std::string &name, Value x, ArrayRef<int64_t> shape) {
    return ReshapeOp::create(b, loc(name), x, b.getDenseI64ArrayAttr(shape), fqn(name));
  }
  /// [b, s, n * head_dim] -> [b, s, n, head_dim]
  Value heads(const std::string &name, Value x, int64_t n) {
    return reshape(name, x, {batch, seq, n, c.headDim});
  }

  Value param(const std::string &module) {
    auto it = params.find(module);
    if (it == params.end())
      fail("internal: no parameter for module '{}'", module);
    return it->second;
  }
  StringAttr fqn(const std::string &name) { return b.getStringAttr(name); }
  Location loc(const std::string &name) {
    return NameLoc::get(b.getStringAttr(name));
  }

  OpBuilder &b;
  const Qwen3Config &c;
  int64_t batch, seq;
  std::map<std::string, Value> params;
};

/// Creates `func @name(inputs..., params...)` with the data inputs tagged by
/// name, binds the parameters by module and hands the entry block's inputs
/// to `body`, which returns the results; results after the first are tagged
/// kiln.output with `resultNames`.
template <typename BodyFn>
void buildFunction(OpBuilder &b, ModuleOp module, StringRef name,
                   ArrayRef<std::pair<StringRef, RankedTensorType>> inputs,
                   ArrayRef<Qwen3Parameter> specs, BodyFn body,
                   ArrayRef<StringRef> resultNames = {}) {
  Type f32 = b.getF32Type();
  SmallVector<Type> argTypes;
  for (const auto &input : inputs)
    argTypes.push_back(input.second);
  for (const Qwen3Parameter &spec : specs)
    argTypes.push_back(RankedTensorType::get(spec.shape, f32));
  b.setInsertionPointToEnd(module.getBody());
  auto fn = func::FuncOp::create(b, NameLoc::get(b.getStringAttr(name)), name,
                                 b.getFunctionType(argTypes, {}));
  Block *entry = fn.addEntryBlock();
  SmallVector<Value> inputValues;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    fn.setArgAttr(i, kInputAttr, b.getStringAttr(input.first));
    inputValues.push_back(entry->getArgument(i));
  }
  std::map<std::string, Value> params;
  for (auto [i, spec] : llvm::enumerate(specs)) {
    unsigned index = inputs.size() + i;
    fn.setArgAttr(index, kParamAttr, b.getStringAttr(spec.hfKey));
    params[spec.module] = entry->getArgument(index);
  }
  b.setInsertionPointToStart(entry);
  SmallVector<Value> results = body(inputValues, std::move(params));
  func::ReturnOp::create(b, fn.getLoc(), results);
  fn.setFunctionType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  // Results after the first are metrics (the MoE aux loss), tagged by name.
  for (auto [i, name] : llvm::enumerate(resultNames))
    fn.setResultAttr(i + 1, kOutputAttr, b.getStringAttr(name));
}

} // namespace

OwningOpRef<ModuleOp> captureQwen3(MLIRContext &context, const Qwen3Config &config,
                                   const CaptureOptions &options) {
  loadKilnDialects(context);
  int64_t batch = options.batch;
  int64_t seq = options.seq ? options.seq : std::min<int64_t>(2048, config.maxPositionEmbeddings);
  if (batch <= 0 || seq <= 0)
    fail("capture: batch and seq must be positive (got batch {}, seq {})", batch, seq);
  if (seq > config.maxPositionEmbeddings)
    fail("capture: seq {} exceeds max_position_embeddings {} of {} (a longer context is a "
         "choice: raise it, model.max_position_embeddings={} in a run's config)",
         seq, config.maxPositionEmbeddings, config.name, seq);
  // Element counts must fit: every tensor (the logits, the experts'
  // activations, attention's per-head rows) stays within kMaxElements, so
  // its bytes (at most 8 per element) and the int64 products of the cost
  // code fit too (128-bit arithmetic here). FLOP counts are doubles and have
  // no such limit: a large model's global step passes int64.
  using Wide = __int128;
  Wide tokens = Wide(batch) * seq;
  Wide widest = std::max({Wide(config.vocabSize), Wide(config.intermediateSize),
                          Wide(config.numExperts) * config.moeIntermediateSize,
                          Wide(config.numHeads) * config.headDim * seq});
  if (tokens * widest > Qwen3Config::kMaxElements)
    fail("capture: batch {} x seq {} of {} gives tensors too large to address: up to {:.3g} "
         "elements, beyond the {:.3g} Kiln addresses (the logits alone are {:.3g})",
         batch, seq, config.name, double(tokens * widest), double(Qwen3Config::kMaxElements),
         double(tokens * config.vocabSize));

  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(NameLoc::get(b.getStringAttr(config.name)));
  auto i64 = b.getI64Type();
  std::vector<Qwen3Parameter> specs = qwen3Parameters(config);

  auto ids = RankedTensorType::get({batch, seq}, i64);
  buildFunction(b, *module, "forward", {{kInputIdsInput, ids}}, specs,
                [&](ValueRange inputs, std::map<std::string, Value> params) {
                  Qwen3Builder model(b, config, batch, seq, std::move(params));
                  return SmallVector<Value>{model.logits(inputs[0])};
                });
  // Labels are a second input, split from the token windows on the host.
  // With output_router_logits the MoE aux loss is added to the loss and
  // returned beside it for logging.
  SmallVector<StringRef> lossMetrics;
  if (config.isMoe() && config.outputRouterLogits && config.numSparseLayers() > 0)
    lossMetrics.push_back(kAuxLossOutput);
  buildFunction(b, *module, "loss", {{kInputIdsInput, ids}, {kLabelsInput, ids}}, specs,
                [&](ValueRange inputs, std::map<std::string, Value> params) {
                  Qwen3Builder model(b, config, batch, seq, std::move(params));
                  Value logits = model.logits(inputs[0]);
                  Value loss = CrossEntropyOp::create(b, NameLoc::get(b.getStringAttr("loss")),
                                                      logits, inputs[1],
                                                      b.getStringAttr("loss"), IntegerAttr());
                  if (lossMetrics.empty())
                    return SmallVector<Value>{loss};
                  auto [total, aux] = model.withAuxLoss(loss);
                  return SmallVector<Value>{total, aux};
                },
                lossMetrics);

  SmallVector<NamedAttribute> model{
      b.getNamedAttr("name", b.getStringAttr(config.name)),
      b.getNamedAttr("hidden_size", b.getI64IntegerAttr(config.hiddenSize)),
      b.getNamedAttr("num_hidden_layers", b.getI64IntegerAttr(config.numLayers)),
      b.getNamedAttr("num_attention_heads", b.getI64IntegerAttr(config.numHeads)),
      b.getNamedAttr("num_key_value_heads", b.getI64IntegerAttr(config.numKvHeads)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(config.headDim)),
      b.getNamedAttr("intermediate_size", b.getI64IntegerAttr(config.intermediateSize)),
      b.getNamedAttr("vocab_size", b.getI64IntegerAttr(config.vocabSize)),
      b.getNamedAttr("tie_word_embeddings", b.getBoolAttr(config.tieWordEmbeddings)),
      b.getNamedAttr("parameters", b.getI64IntegerAttr(config.parameterCount())),
      b.getNamedAttr("batch", b.getI64IntegerAttr(batch)),
      b.getNamedAttr("seq_len", b.getI64IntegerAttr(seq)),
  };
  if (config.isMoe())
    model.append({
        b.getNamedAttr("num_experts", b.getI64IntegerAttr(config.numExperts)),
        b.getNamedAttr("num_experts_per_tok", b.getI64IntegerAttr(config.numExpertsPerTok)),
        b.getNamedAttr("moe_intermediate_size", b.getI64IntegerAttr(config.moeIntermediateSize)),
        b.getNamedAttr("active_parameters", b.getI64IntegerAttr(config.activeParameterCount())),
    });
  (*module)->setAttr(kModelAttr, b.getDictionaryAttr(model));
  verifyOrFail(*module, "captured " + config.name);
  return module;
}

} // namespace kiln
