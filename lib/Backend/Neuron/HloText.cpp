//===- HloText.cpp - XLA's HLO text of an HloModuleProto ------------------===//
//
// Prints what XLA's HloModule::ToString writes for the fields Kiln sets:
// the module header with the entry layout and aliasing, then each
// computation (callees first), one instruction per line with its operands'
// shapes and its attributes in XLA's spelling.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <map>

namespace kiln::neuron {
namespace {

std::string typeName(xla::PrimitiveType t) {
  switch (t) {
  case xla::PRED:
    return "pred";
  case xla::S8:
    return "s8";
  case xla::S16:
    return "s16";
  case xla::S32:
    return "s32";
  case xla::S64:
    return "s64";
  case xla::U8:
    return "u8";
  case xla::U16:
    return "u16";
  case xla::U32:
    return "u32";
  case xla::U64:
    return "u64";
  case xla::F16:
    return "f16";
  case xla::F32:
    return "f32";
  case xla::F64:
    return "f64";
  case xla::BF16:
    return "bf16";
  default:
    return "unknown";
  }
}

template <typename Range> std::string joined(const Range &values, const char *sep = ",") {
  std::string out;
  for (const auto &v : values)
    out += (out.empty() ? "" : sep) + fmt::format("{}", v);
  return out;
}

std::string shapeText(const xla::ShapeProto &s, bool layout = true) {
  if (s.element_type() == xla::TUPLE) {
    std::string out = "(";
    for (int i = 0; i < s.tuple_shapes_size(); ++i)
      out += (i ? ", " : "") + shapeText(s.tuple_shapes(i), layout);
    return out + ")";
  }
  std::string out = typeName(s.element_type()) + "[" + joined(s.dimensions()) + "]";
  if (layout && s.dimensions_size() > 0)
    out += "{" + joined(s.layout().minor_to_major()) + "}";
  return out;
}

std::string floatText(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v < 0 ? "-inf" : "inf";
  return fmt::format("{:.9g}", v);
}

/// Literal values in nested braces (rank > 0) or alone (a scalar).
std::string literalText(const xla::LiteralProto &lit) {
  std::vector<std::string> values;
  for (float v : lit.f32s())
    values.push_back(floatText(v));
  for (int32_t v : lit.s32s())
    values.push_back(std::to_string(v));
  for (int64_t v : lit.s64s())
    values.push_back(std::to_string(v));
  for (uint32_t v : lit.u32s())
    values.push_back(std::to_string(v));
  for (bool v : lit.preds())
    values.push_back(v ? "true" : "false");
  for (float v : bf16LiteralValues(lit))
    values.push_back(floatText(v));
  const auto &dims = lit.shape().dimensions();
  if (dims.empty())
    return values.empty() ? "0" : values.front();
  // Nested braces, innermost dimension last.
  std::function<std::string(int, size_t &)> nest = [&](int d, size_t &at) {
    std::string out = "{";
    for (int64_t i = 0; i < dims[d]; ++i) {
      out += i ? ", " : "";
      out += d + 1 == int(dims.size()) ? values[at++] : nest(d + 1, at);
    }
    return out + "}";
  };
  size_t at = 0;
  return nest(0, at);
}

std::string groupsText(const xla::HloInstructionProto &inst) {
  std::string out = "{";
  for (int i = 0; i < inst.replica_groups_size(); ++i)
    out += (i ? "," : "") + std::string("{") + joined(inst.replica_groups(i).replica_ids()) + "}";
  return out + "}";
}

std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

class Printer {
public:
  explicit Printer(const xla::HloModuleProto &module) {
    for (const auto &comp : module.computations()) {
      computationNames[comp.id()] = comp.name();
      for (const auto &inst : comp.instructions())
        instructions[inst.id()] = &inst;
    }
  }

  std::string instruction(const xla::HloInstructionProto &inst, bool root) const;
  std::string computation(const xla::HloComputationProto &comp, bool entry) const;

private:
  std::string attributes(const xla::HloInstructionProto &inst) const;
  std::map<int64_t, std::string> computationNames;
  std::map<int64_t, const xla::HloInstructionProto *> instructions;
};

std::string Printer::attributes(const xla::HloInstructionProto &inst) const {
  const std::string &op = inst.opcode();
  std::vector<std::string> attrs;
  auto dims = [&](const char *key) { attrs.push_back(fmt::format("{}={{{}}}", key, joined(inst.dimensions()))); };
  bool dimensioned = op == hlo::AllGatherOp::getOpcode() ||
                     op == hlo::ReduceScatterOp::getOpcode() || op == hlo::AllToAllOp::getOpcode();
  if (op == hlo::BroadcastInDimOp::getOpcode() || op == hlo::TransposeOp::getOpcode() ||
      op == hlo::ConcatenateOp::getOpcode() || op == hlo::ReduceOp::getOpcode() || dimensioned) {
    if (dimensioned) {
      if (inst.channel_id() > 0)
        attrs.push_back(fmt::format("channel_id={}", inst.channel_id()));
      attrs.push_back("replica_groups=" + groupsText(inst));
    }
    dims("dimensions");
    if (dimensioned && inst.use_global_device_ids())
      attrs.push_back("use_global_device_ids=true");
  } else if (op == hlo::AllReduceOp::getOpcode()) {
    if (inst.channel_id() > 0)
      attrs.push_back(fmt::format("channel_id={}", inst.channel_id()));
    attrs.push_back("replica_groups=" + groupsText(inst));
    if (inst.use_global_device_ids())
      attrs.push_back("use_global_device_ids=true");
  } else if (op == hlo::IotaOp::getOpcode()) {
    attrs.push_back(fmt::format("iota_dimension={}", inst.dimensions(0)));
  } else if (op == hlo::CompareOp::getOpcode()) {
    attrs.push_back("direction=" + inst.comparison_direction());
  } else if (op == hlo::SliceOp::getOpcode()) {
    std::vector<std::string> parts;
    for (const auto &s : inst.slice_dimensions())
      parts.push_back(s.stride() == 1 ? fmt::format("[{}:{}]", s.start(), s.limit())
                                      : fmt::format("[{}:{}:{}]", s.start(), s.limit(),
                                                    s.stride()));
    attrs.push_back("slice={" + joined(parts, ", ") + "}");
  } else if (op == hlo::DynamicSliceOp::getOpcode()) {
    attrs.push_back("dynamic_slice_sizes={" + joined(inst.dynamic_slice_sizes()) + "}");
  } else if (op == hlo::PadOp::getOpcode()) {
    std::vector<std::string> parts;
    for (const auto &d : inst.padding_config().dimensions())
      parts.push_back(d.interior_padding()
                          ? fmt::format("{}_{}_{}", d.edge_padding_low(), d.edge_padding_high(),
                                        d.interior_padding())
                          : fmt::format("{}_{}", d.edge_padding_low(), d.edge_padding_high()));
    attrs.push_back("padding=" + joined(parts, "x"));
  } else if (op == hlo::DotGeneralOp::getOpcode()) {
    const auto &d = inst.dot_dimension_numbers();
    if (d.lhs_batch_dimensions_size())
      attrs.push_back("lhs_batch_dims={" + joined(d.lhs_batch_dimensions()) + "}");
    attrs.push_back("lhs_contracting_dims={" + joined(d.lhs_contracting_dimensions()) + "}");
    if (d.rhs_batch_dimensions_size())
      attrs.push_back("rhs_batch_dims={" + joined(d.rhs_batch_dimensions()) + "}");
    attrs.push_back("rhs_contracting_dims={" + joined(d.rhs_contracting_dimensions()) + "}");
  } else if (op == hlo::GatherOp::getOpcode()) {
    const auto &d = inst.gather_dimension_numbers();
    attrs.push_back("offset_dims={" + joined(d.offset_dims()) + "}");
    attrs.push_back("collapsed_slice_dims={" + joined(d.collapsed_slice_dims()) + "}");
    attrs.push_back("start_index_map={" + joined(d.start_index_map()) + "}");
    attrs.push_back(fmt::format("index_vector_dim={}", d.index_vector_dim()));
    attrs.push_back("slice_sizes={" + joined(inst.gather_slice_sizes()) + "}");
  } else if (op == hlo::ScatterOp::getOpcode()) {
    const auto &d = inst.scatter_dimension_numbers();
    attrs.push_back("update_window_dims={" + joined(d.update_window_dims()) + "}");
    attrs.push_back("inserted_window_dims={" + joined(d.inserted_window_dims()) + "}");
    attrs.push_back("scatter_dims_to_operand_dims={" +
                    joined(d.scatter_dims_to_operand_dims()) + "}");
    attrs.push_back(fmt::format("index_vector_dim={}", d.index_vector_dim()));
  } else if (op == "get-tuple-element") {
    attrs.push_back(fmt::format("index={}", inst.tuple_index()));
  } else if (op == hlo::CustomCallOp::getOpcode()) {
    attrs.push_back("custom_call_target=" + quoted(inst.custom_call_target()));
    if (!inst.backend_config().empty())
      attrs.push_back("backend_config=" + quoted(inst.backend_config()));
    if (!inst.output_operand_aliasing().empty()) {
      // XLA's form: {output shape index}: (operand, {operand shape index}).
      std::vector<std::string> pairs;
      for (const auto &a : inst.output_operand_aliasing())
        pairs.push_back(fmt::format("{{{}}}: ({}, {{{}}})", joined(a.output_shape_index()),
                                    a.operand_index(), joined(a.operand_shape_index())));
      attrs.push_back("output_to_operand_aliasing={" + joined(pairs, ", ") + "}");
    }
  }
  for (int64_t id : inst.called_computation_ids())
    attrs.push_back("to_apply=%" + computationNames.at(id));
  if (!inst.frontend_attributes().map().empty()) {
    // XLA prints them sorted by key.
    std::map<std::string, std::string> sorted(inst.frontend_attributes().map().begin(),
                                              inst.frontend_attributes().map().end());
    std::vector<std::string> parts;
    for (const auto &[key, value] : sorted)
      parts.push_back(key + "=" + quoted(value));
    attrs.push_back("frontend_attributes={" + joined(parts, ",") + "}");
  }
  if (!inst.metadata().op_name().empty())
    attrs.push_back("metadata={op_name=" + quoted(inst.metadata().op_name()) + "}");
  std::string out;
  for (const std::string &a : attrs)
    out += ", " + a;
  return out;
}

std::string Printer::instruction(const xla::HloInstructionProto &inst, bool root) const {
  std::string operands;
  if (inst.opcode() == "parameter")
    operands = std::to_string(inst.parameter_number());
  else if (inst.opcode() == hlo::ConstantOp::getOpcode())
    operands = literalText(inst.literal());
  for (int64_t id : inst.operand_ids()) {
    const xla::HloInstructionProto &o = *instructions.at(id);
    operands += (operands.empty() ? "" : ", ") + shapeText(o.shape()) + " %" + o.name();
  }
  return fmt::format("  {}%{} = {} {}({}){}\n", root ? "ROOT " : "", inst.name(),
                     shapeText(inst.shape()), inst.opcode(), operands, attributes(inst));
}

std::string Printer::computation(const xla::HloComputationProto &comp, bool entry) const {
  const auto &program = comp.program_shape();
  std::vector<std::string> params;
  for (int i = 0; i < program.parameters_size(); ++i)
    params.push_back(program.parameter_names(i) + ": " + shapeText(program.parameters(i), false));
  std::string out = fmt::format("{}%{} ({}) -> {} {{\n", entry ? "ENTRY " : "", comp.name(),
                                joined(params, ", "), shapeText(program.result(), false));
  for (const auto &inst : comp.instructions())
    out += instruction(inst, inst.id() == comp.root_id());
  return out + "}\n";
}

} // namespace

std::string printHloText(const xla::HloModuleProto &module) {
  const auto &program = module.host_program_shape();
  std::vector<std::string> params;
  for (const auto &p : program.parameters())
    params.push_back(shapeText(p));
  std::string header = fmt::format("HloModule {}, entry_computation_layout={{({})->{}}}",
                                   module.name(), joined(params, ", "),
                                   shapeText(program.result()));
  if (module.input_output_alias().entries_size()) {
    std::vector<std::string> aliases;
    for (const auto &e : module.input_output_alias().entries())
      aliases.push_back(fmt::format("{{{}}}: ({}, {{{}}}, {})", joined(e.output_shape_index()),
                                    e.parameter_number(), joined(e.parameter_shape_index()),
                                    e.kind() == xla::MUST_ALIAS ? "must-alias" : "may-alias"));
    header += ", input_output_alias={ " + joined(aliases, ", ") + " }";
  }
  Printer printer(module);
  std::string out = header + "\n";
  for (const auto &comp : module.computations())
    out += "\n" + printer.computation(comp, comp.id() == module.entry_computation_id());
  return out;
}

} // namespace kiln::neuron
