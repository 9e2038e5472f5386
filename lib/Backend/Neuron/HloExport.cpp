//===- HloExport.cpp - The hlo dialect as XLA's HloModuleProto ------------===//
//
// One instruction per hlo op, named <opcode>.<id>, with XLA's fields for
// its attributes (dimensions, dimension numbers, replica groups, ...).
// Reductions name a combiner; each (combiner, element type) pair becomes one
// two-parameter computation, written before the entry that calls it.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Backend/Neuron/NeuronConformance.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/StateAliases.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstring>
#include <map>

using namespace mlir;

namespace kiln::neuron {
namespace {

FailureOr<xla::PrimitiveType> primitiveType(Type t) {
  if (t.isF32())
    return xla::F32;
  if (t.isBF16())
    return xla::BF16;
  if (t.isF16())
    return xla::F16;
  if (t.isInteger(1))
    return xla::PRED;
  if (auto i = dyn_cast<IntegerType>(t)) {
    bool u = i.isUnsigned();
    switch (i.getWidth()) {
    case 32:
      return u ? xla::U32 : xla::S32;
    case 64:
      return u ? xla::U64 : xla::S64;
    default:
      break;
    }
  }
  return failure();
}

/// A dense array shape with the default (row-major) layout.
void setShape(xla::ShapeProto *shape, RankedTensorType type, xla::PrimitiveType element) {
  shape->set_element_type(element);
  for (int64_t d : type.getShape())
    shape->add_dimensions(d);
  for (int64_t d = 0; d < type.getRank(); ++d)
    shape->add_is_dynamic_dimension(false);
  auto *layout = shape->mutable_layout();
  for (int64_t d = type.getRank() - 1; d >= 0; --d)
    layout->add_minor_to_major(d);
}

template <typename Field> void append(Field *field, ArrayRef<int64_t> values) {
  for (int64_t v : values)
    field->Add(v);
}

class Exporter {
public:
  explicit Exporter(xla::HloModuleProto &module) : module(module) {}

  LogicalResult run(func::FuncOp func, StringRef name);

private:
  LogicalResult shapeOf(Operation *op, Type type, xla::ShapeProto *shape);
  xla::HloInstructionProto *add(xla::HloComputationProto *comp, StringRef opcode,
                                Location loc);
  LogicalResult exportOp(Operation *op, xla::HloComputationProto *entry);
  /// The op's attributes as the fields of its instruction `inst`.
  LogicalResult exportAttributes(Operation *op, xla::HloInstructionProto *inst);
  FailureOr<int64_t> combiner(Operation *op, hlo::Combiner c, Type element);
  LogicalResult literal(hlo::ConstantOp op, xla::LiteralProto *lit);
  void collective(xla::HloInstructionProto *inst, DenseIntElementsAttr groups,
                  std::optional<uint64_t> channel, bool global);
  /// The replica groups, channel and device-id mode of collective `op`.
  template <typename OpTy> void collective(xla::HloInstructionProto *inst, OpTy op) {
    collective(inst, cast<DenseIntElementsAttr>(op.getReplicaGroups()), op.getChannelId(),
               op.getUseGlobalDeviceIds());
  }

  xla::HloModuleProto &module;
  int64_t nextId = 1;
  llvm::DenseMap<Value, int64_t> ids;
  std::map<std::pair<int, std::string>, int64_t> combiners;
  std::vector<xla::HloComputationProto> computations;
};

LogicalResult Exporter::shapeOf(Operation *op, Type type, xla::ShapeProto *shape) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  FailureOr<xla::PrimitiveType> element =
      tensor ? primitiveType(tensor.getElementType()) : FailureOr<xla::PrimitiveType>(failure());
  if (failed(element))
    return op->emitOpError() << "HLO export: no XLA type for " << type;
  setShape(shape, tensor, *element);
  return success();
}

xla::HloInstructionProto *Exporter::add(xla::HloComputationProto *comp, StringRef opcode,
                                        Location loc) {
  xla::HloInstructionProto *inst = comp->add_instructions();
  int64_t id = nextId++;
  inst->set_id(id);
  inst->set_opcode(opcode.str());
  inst->set_name(opcode.str() + "." + std::to_string(id));
  if (auto named = dyn_cast<NameLoc>(loc))
    inst->mutable_metadata()->set_op_name(named.getName().str());
  return inst;
}

FailureOr<int64_t> Exporter::combiner(Operation *op, hlo::Combiner c, Type element) {
  std::string typeName;
  llvm::raw_string_ostream(typeName) << element;
  auto key = std::make_pair(int(c), typeName);
  if (auto it = combiners.find(key); it != combiners.end())
    return it->second;
  FailureOr<xla::PrimitiveType> prim = primitiveType(element);
  if (failed(prim))
    return op->emitOpError() << "HLO export: no XLA type for " << element;
  static const char *opcodes[] = {"add", "maximum", "minimum", "multiply"};
  xla::HloComputationProto comp;
  int64_t compId = nextId++;
  comp.set_id(compId);
  comp.set_name(std::string(hlo::stringifyCombiner(c)) + "." + typeName);
  auto scalarType = RankedTensorType::get({}, element);
  std::vector<int64_t> params;
  for (int i = 0; i < 2; ++i) {
    xla::HloInstructionProto *p = add(&comp, "parameter", UnknownLoc::get(op->getContext()));
    p->set_name(i ? "rhs." + std::to_string(p->id()) : "lhs." + std::to_string(p->id()));
    p->set_parameter_number(i);
    setShape(p->mutable_shape(), scalarType, *prim);
    setShape(comp.mutable_program_shape()->add_parameters(), scalarType, *prim);
    comp.mutable_program_shape()->add_parameter_names(p->name());
    params.push_back(p->id());
  }
  xla::HloInstructionProto *root = add(&comp, opcodes[int(c)], UnknownLoc::get(op->getContext()));
  setShape(root->mutable_shape(), scalarType, *prim);
  append(root->mutable_operand_ids(), params);
  setShape(comp.mutable_program_shape()->mutable_result(), scalarType, *prim);
  comp.set_root_id(root->id());
  computations.push_back(std::move(comp));
  combiners[key] = compId;
  return compId;
}

LogicalResult Exporter::literal(hlo::ConstantOp op, xla::LiteralProto *lit) {
  if (failed(shapeOf(op, op.getType(), lit->mutable_shape())))
    return failure();
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError("HLO export: constants must be dense");
  Type element = op.getType().getElementType();
  if (element.isF32()) {
    for (float v : dense.getValues<float>())
      lit->add_f32s(v);
  } else if (element.isInteger(1)) {
    for (bool v : dense.getValues<bool>())
      lit->add_preds(v);
  } else if (element.isSignlessInteger(32)) {
    for (int32_t v : dense.getValues<int32_t>())
      lit->add_s32s(v);
  } else if (element.isSignlessInteger(64)) {
    for (int64_t v : dense.getValues<int64_t>())
      lit->add_s64s(v);
  } else if (element.isBF16()) {
    std::string bytes;
    for (APFloat v : dense.getValues<APFloat>()) {
      uint16_t bits = uint16_t(v.bitcastToAPInt().getZExtValue());
      bytes.push_back(char(bits & 0xff));
      bytes.push_back(char(bits >> 8));
    }
    lit->set_bf16s(bytes);
  } else {
    return op.emitOpError() << "HLO export: no literal of " << element;
  }
  return success();
}

void Exporter::collective(xla::HloInstructionProto *inst, DenseIntElementsAttr groups,
                          std::optional<uint64_t> channel, bool global) {
  auto type = cast<ShapedType>(groups.getType());
  std::vector<int64_t> flat;
  for (APInt v : groups.getValues<APInt>())
    flat.push_back(v.getSExtValue());
  for (int64_t g = 0; g < type.getDimSize(0); ++g) {
    xla::ReplicaGroup *group = inst->add_replica_groups();
    for (int64_t i = 0; i < type.getDimSize(1); ++i)
      group->add_replica_ids(flat[g * type.getDimSize(1) + i]);
  }
  // Without a channel id, cross-replica: the groups list replica ids.
  if (channel)
    inst->set_channel_id(int64_t(*channel));
  inst->set_use_global_device_ids(global);
}

LogicalResult Exporter::exportAttributes(Operation *op, xla::HloInstructionProto *inst) {
  auto element = [&]() {
    return cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
  };
  auto called = [&](hlo::Combiner c) -> LogicalResult {
    FailureOr<int64_t> comp = combiner(op, c, element());
    if (failed(comp))
      return failure();
    inst->add_called_computation_ids(*comp);
    return success();
  };

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](hlo::ConstantOp c) { return literal(c, inst->mutable_literal()); })
      .Case([&](hlo::IotaOp c) {
        inst->add_dimensions(c.getIotaDimension());
        return success();
      })
      .Case([&](hlo::CompareOp c) {
        inst->set_comparison_direction(
            hlo::stringifyComparisonDirection(c.getComparisonDirection()).str());
        return success();
      })
      .Case([&](hlo::BroadcastInDimOp c) {
        append(inst->mutable_dimensions(), c.getBroadcastDimensions());
        return success();
      })
      .Case([&](hlo::TransposeOp c) {
        append(inst->mutable_dimensions(), c.getPermutation());
        return success();
      })
      .Case([&](hlo::ConcatenateOp c) {
        inst->add_dimensions(c.getDimension());
        return success();
      })
      .Case([&](hlo::SliceOp c) {
        for (size_t i = 0; i < c.getStartIndices().size(); ++i) {
          auto *s = inst->add_slice_dimensions();
          s->set_start(c.getStartIndices()[i]);
          s->set_limit(c.getLimitIndices()[i]);
          s->set_stride(c.getStrides()[i]);
        }
        return success();
      })
      .Case([&](hlo::DynamicSliceOp c) {
        append(inst->mutable_dynamic_slice_sizes(), c.getSliceSizes());
        return success();
      })
      .Case([&](hlo::PadOp c) {
        for (size_t i = 0; i < c.getEdgePaddingLow().size(); ++i) {
          auto *d = inst->mutable_padding_config()->add_dimensions();
          d->set_edge_padding_low(c.getEdgePaddingLow()[i]);
          d->set_edge_padding_high(c.getEdgePaddingHigh()[i]);
          d->set_interior_padding(c.getInteriorPadding()[i]);
        }
        return success();
      })
      .Case([&](hlo::DotGeneralOp c) {
        auto *dims = inst->mutable_dot_dimension_numbers();
        append(dims->mutable_lhs_batch_dimensions(), c.getLhsBatchingDimensions());
        append(dims->mutable_rhs_batch_dimensions(), c.getRhsBatchingDimensions());
        append(dims->mutable_lhs_contracting_dimensions(), c.getLhsContractingDimensions());
        append(dims->mutable_rhs_contracting_dimensions(), c.getRhsContractingDimensions());
        return success();
      })
      .Case([&](hlo::ReduceOp c) {
        append(inst->mutable_dimensions(), c.getDimensions());
        return called(c.getCombiner());
      })
      .Case([&](hlo::GatherOp c) {
        auto *dims = inst->mutable_gather_dimension_numbers();
        append(dims->mutable_offset_dims(), c.getOffsetDims());
        append(dims->mutable_collapsed_slice_dims(), c.getCollapsedSliceDims());
        append(dims->mutable_start_index_map(), c.getStartIndexMap());
        dims->set_index_vector_dim(c.getIndexVectorDim());
        append(inst->mutable_gather_slice_sizes(), c.getSliceSizes());
        return success();
      })
      .Case([&](hlo::ScatterOp c) {
        auto *dims = inst->mutable_scatter_dimension_numbers();
        append(dims->mutable_update_window_dims(), c.getUpdateWindowDims());
        append(dims->mutable_inserted_window_dims(), c.getInsertedWindowDims());
        append(dims->mutable_scatter_dims_to_operand_dims(), c.getScatterDimsToOperandDims());
        dims->set_index_vector_dim(c.getIndexVectorDim());
        return called(c.getCombiner());
      })
      .Case([&](hlo::AllGatherOp c) {
        inst->add_dimensions(c.getAllGatherDim());
        collective(inst, c);
        return success();
      })
      .Case([&](hlo::ReduceScatterOp c) {
        inst->add_dimensions(c.getScatterDimension());
        collective(inst, c);
        return called(c.getCombiner());
      })
      .Case([&](hlo::AllReduceOp c) {
        collective(inst, c);
        return called(c.getCombiner());
      })
      .Case([&](hlo::AllToAllOp c) {
        inst->add_dimensions(c.getSplitDimension());
        collective(inst, c);
        return success();
      })
      .Case([&](hlo::CustomCallOp c) {
        inst->set_custom_call_target(c.getCallTargetName().str());
        inst->set_backend_config(c.getBackendConfig().str());
        // A tuple-shaped call (several results) names the aliasing
        // result by its tuple index.
        if (std::optional<ArrayRef<int64_t>> aliases = c.getOutputOperandAliases())
          for (auto [result, operand] : llvm::enumerate(*aliases)) {
            if (operand < 0)
              continue;
            xla::OutputOperandAliasing *alias = inst->add_output_operand_aliasing();
            if (c.getNumResults() > 1)
              alias->add_output_shape_index(int64_t(result));
            alias->set_operand_index(operand);
          }
        return success();
      })
      .Default([](Operation *) { return success(); });
}

LogicalResult Exporter::exportOp(Operation *op, xla::HloComputationProto *entry) {
  auto hloOp = dyn_cast<hlo::OpcodeInterface>(op);
  if (!hloOp)
    return op->emitOpError("HLO export: not an hlo dialect op");
  StringRef opcode = hloOp.getOpcode();
  // XLA's opt-barrier takes one operand, the tuple of the values it holds.
  xla::HloInstructionProto *operandTuple = nullptr;
  if (isa<hlo::OptBarrierOp>(op)) {
    operandTuple = add(entry, "tuple", op->getLoc());
    xla::ShapeProto *shape = operandTuple->mutable_shape();
    shape->set_element_type(xla::TUPLE);
    for (Value operand : op->getOperands()) {
      operandTuple->add_operand_ids(ids.lookup(operand));
      if (failed(shapeOf(op, operand.getType(), shape->add_tuple_shapes())))
        return failure();
    }
  }
  xla::HloInstructionProto *inst = add(entry, opcode, op->getLoc());
  if (operandTuple)
    inst->add_operand_ids(operandTuple->id());
  else
    for (Value operand : op->getOperands())
      inst->add_operand_ids(ids.lookup(operand));
  // The shape: one result, or a tuple of several (custom calls) or of an
  // opt-barrier's, each then read by a get-tuple-element.
  bool tupled = op->getNumResults() != 1 || operandTuple;
  if (!tupled) {
    if (failed(shapeOf(op, op->getResult(0).getType(), inst->mutable_shape())))
      return failure();
    ids[op->getResult(0)] = inst->id();
  } else {
    xla::ShapeProto *tuple = inst->mutable_shape();
    tuple->set_element_type(xla::TUPLE);
    for (Type t : op->getResultTypes())
      if (failed(shapeOf(op, t, tuple->add_tuple_shapes())))
        return failure();
  }

  if (failed(exportAttributes(op, inst)))
    return failure();

  if (tupled)
    for (auto [i, r] : llvm::enumerate(op->getResults())) {
      xla::HloInstructionProto *gte = add(entry, "get-tuple-element", op->getLoc());
      gte->set_tuple_index(int64_t(i));
      gte->add_operand_ids(inst->id());
      if (failed(shapeOf(op, r.getType(), gte->mutable_shape())))
        return failure();
      ids[r] = gte->id();
    }
  return success();
}

/// The name an argument or result has in the manifest (a Hugging Face key,
/// an optimizer state, an input, the rank; an output), "" without one. A
/// data input of an accumulating step names its microbatch
/// ("input_ids.microbatch1"): NEFF names are unique. A pipeline stage's
/// gradients are "grad.<key>", what crosses or stays "transfer<N>",
/// "residual<N>", "cotangent<N>".
std::string tensorName(DictionaryAttr attrs) {
  if (!attrs)
    return "";
  for (const char *key : {"kiln.param", "kiln.state", "kiln.input", "kiln.rank", "kiln.output"})
    if (auto s = attrs.getAs<StringAttr>(key)) {
      if (auto microbatch = attrs.getAs<IntegerAttr>(kMicrobatchAttr))
        return s.str() + ".microbatch" + std::to_string(microbatch.getInt());
      return s.str();
    }
  if (auto key = attrs.getAs<StringAttr>("kiln.grad"))
    return "grad." + key.str();
  for (const char *role : {"transfer", "residual", "cotangent"})
    if (auto n = attrs.getAs<IntegerAttr>(std::string("kiln.") + role))
      return role + std::to_string(n.getInt());
  return "";
}

LogicalResult Exporter::run(func::FuncOp func, StringRef name) {
  module.set_name(name.str());
  xla::HloComputationProto entry;
  xla::ProgramShapeProto *program = entry.mutable_program_shape();
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    xla::HloInstructionProto *p = add(&entry, "parameter", arg.getLoc());
    p->set_parameter_number(arg.getArgNumber());
    p->set_name("p" + std::to_string(arg.getArgNumber()) + "." + std::to_string(p->id()));
    DictionaryAttr attrs = func.getArgAttrDict(arg.getArgNumber());
    if (std::string tensor = tensorName(attrs); !tensor.empty()) {
      p->mutable_metadata()->set_op_name(tensor);
      (*p->mutable_frontend_attributes()->mutable_map())[kNeffInputNames] = tensor;
    }
    if (failed(shapeOf(func, arg.getType(), p->mutable_shape())))
      return failure();
    *program->add_parameters() = p->shape();
    program->add_parameter_names(p->name());
    ids[arg] = p->id();
  }
  for (Operation &op : body.without_terminator())
    if (failed(exportOp(&op, &entry)))
      return failure();

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  xla::HloInstructionProto *root = add(&entry, "tuple", ret.getLoc());
  xla::ShapeProto *tuple = root->mutable_shape();
  tuple->set_element_type(xla::TUPLE);
  std::vector<std::string> outputNames;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    root->add_operand_ids(ids.lookup(v));
    if (failed(shapeOf(ret, v.getType(), tuple->add_tuple_shapes())))
      return failure();
    outputNames.push_back(tensorName(func.getResultAttrDict(unsigned(i))));
  }
  if (llvm::none_of(outputNames, [](const std::string &n) { return n.empty(); }))
    (*root->mutable_frontend_attributes()->mutable_map())[kNeffOutputNames] =
        llvm::join(outputNames, ",");
  *program->mutable_result() = *tuple;
  entry.set_root_id(root->id());
  entry.set_id(nextId++);
  entry.set_name("main." + std::to_string(entry.id()));

  // Parameters and results of one parameter or state name alias: must-alias,
  // as NxD writes them (the state is updated in place on the device).
  for (auto [result, parameter] : llvm::enumerate(updatedArguments(func))) {
    if (parameter < 0)
      continue;
    auto *alias = module.mutable_input_output_alias()->add_entries();
    alias->add_output_shape_index(int64_t(result));
    alias->set_parameter_number(parameter);
    alias->set_kind(xla::MUST_ALIAS);
  }

  for (xla::HloComputationProto &comp : computations)
    *module.add_computations() = std::move(comp);
  *module.mutable_host_program_shape() = *program;
  module.set_entry_computation_name(entry.name());
  module.set_entry_computation_id(entry.id());
  *module.add_computations() = std::move(entry);
  return success();
}

} // namespace

std::vector<float> bf16LiteralValues(const xla::LiteralProto &literal) {
  const std::string &bytes = literal.bf16s();
  std::vector<float> values;
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    uint32_t bits = (uint32_t(uint8_t(bytes[i + 1])) << 24) | (uint32_t(uint8_t(bytes[i])) << 16);
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  return values;
}

FailureOr<xla::HloModuleProto> exportHloModule(ModuleOp module, StringRef name) {
  SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return module.emitError() << "HLO export: expected one function (the entry computation), "
                                 "found "
                              << funcs.size() << "; run kiln-lower-to-hlo first";
  xla::HloModuleProto proto;
  if (failed(Exporter(proto).run(funcs.front(), name)))
    return failure();
  return proto;
}

} // namespace kiln::neuron
