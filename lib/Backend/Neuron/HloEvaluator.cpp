//===- HloEvaluator.cpp - A reference evaluator of emitted HLO ------------===//

#include "kiln/Backend/Neuron/HloEvaluator.h"
#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Support/Error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

namespace kiln::neuron {

int64_t HloArray::size() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

namespace {

using Index = std::vector<int64_t>;

Index stridesOf(const Index &dims) {
  Index s(dims.size(), 1);
  for (int64_t d = int64_t(dims.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * dims[d + 1];
  return s;
}

/// Calls fn(flat, index) for every element of `dims` in row-major order.
void forEachIndex(const Index &dims, const std::function<void(int64_t, const Index &)> &fn) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  Index idx(dims.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(flat, idx);
    for (int64_t d = int64_t(dims.size()) - 1; d >= 0; --d) {
      if (++idx[d] < dims[d])
        break;
      idx[d] = 0;
    }
  }
}

int64_t offsetOf(const Index &idx, const Index &strides) {
  int64_t o = 0;
  for (size_t d = 0; d < idx.size(); ++d)
    o += idx[d] * strides[d];
  return o;
}

/// `v` as a value of `type`: float32 rounding, integer wrap-around, 0/1.
double rounded(double v, xla::PrimitiveType type) {
  switch (type) {
  case xla::F32:
    return double(float(v));
  case xla::BF16: {
    float f = float(v);
    if (std::isnan(f)) // rounding the payload could carry into inf
      return f;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits += 0x7fff + ((bits >> 16) & 1); // round to nearest even
    bits &= 0xffff0000u;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  case xla::PRED:
    return v != 0 ? 1 : 0;
  case xla::S32:
    return double(int32_t(int64_t(std::trunc(v))));
  case xla::U32:
    return double(uint32_t(int64_t(std::trunc(v))));
  case xla::S64:
    return double(int64_t(std::trunc(v)));
  default:
    return v;
  }
}

HloArray arrayOf(const xla::ShapeProto &shape) {
  HloArray a;
  a.type = shape.element_type();
  a.dims.assign(shape.dimensions().begin(), shape.dimensions().end());
  a.values.assign(size_t(a.size()), 0.0);
  return a;
}

using Combine = std::function<double(double, double)>;

Combine combinerOf(const std::string &opcode) {
  if (opcode == hlo::AddOp::getOpcode())
    return [](double a, double b) { return a + b; };
  if (opcode == hlo::MaximumOp::getOpcode())
    return [](double a, double b) { return std::max(a, b); };
  if (opcode == hlo::MinimumOp::getOpcode())
    return [](double a, double b) { return std::min(a, b); };
  if (opcode == hlo::MultiplyOp::getOpcode())
    return [](double a, double b) { return a * b; };
  fail("HLO evaluator: no combiner '{}'", opcode);
}

class Evaluator {
public:
  Evaluator(const xla::HloModuleProto &module, const std::vector<std::vector<HloArray>> &args,
            const HloCustomCall &customCall)
      : module(module), args(args), world(int64_t(args.size())), customCall(customCall) {
    for (const auto &comp : module.computations()) {
      computations[comp.id()] = &comp;
      for (const auto &inst : comp.instructions())
        instructions[inst.id()] = &inst;
    }
  }

  std::vector<std::vector<HloArray>> run() {
    const xla::HloComputationProto &entry = *computations.at(module.entry_computation_id());
    std::map<int64_t, std::vector<HloArray>> values; // by instruction id, per rank
    std::map<int64_t, std::vector<std::vector<HloArray>>> tuples;
    for (const auto &inst : entry.instructions()) {
      const std::string &op = inst.opcode();
      auto operand = [&](int i) -> const std::vector<HloArray> & {
        return values.at(inst.operand_ids(i));
      };
      std::vector<HloArray> out(world);
      if (op == "tuple" || op == hlo::CustomCallOp::getOpcode()) {
        std::vector<std::vector<HloArray>> t(world);
        for (int64_t r = 0; r < world; ++r) {
          if (op == "tuple") {
            for (int i = 0; i < inst.operand_ids_size(); ++i)
              t[r].push_back(operand(i)[r]);
            continue;
          }
          std::vector<const HloArray *> in;
          for (int i = 0; i < inst.operand_ids_size(); ++i)
            in.push_back(&operand(i)[r]);
          t[r] = customCall(inst, in);
        }
        if (op == hlo::CustomCallOp::getOpcode() && inst.shape().element_type() != xla::TUPLE) {
          for (int64_t r = 0; r < world; ++r)
            out[r] = t[r].at(0);
          values[inst.id()] = std::move(out);
          continue;
        }
        tuples[inst.id()] = std::move(t);
        continue;
      }
      // An opt-barrier is a scheduling constraint: the identity on its tuple.
      if (op == hlo::OptBarrierOp::getOpcode()) {
        tuples[inst.id()] = tuples.at(inst.operand_ids(0));
        continue;
      }
      if (op == "get-tuple-element") {
        const auto &t = tuples.at(inst.operand_ids(0));
        for (int64_t r = 0; r < world; ++r)
          out[r] = t[r].at(inst.tuple_index());
        values[inst.id()] = std::move(out);
        continue;
      }
      if (op == hlo::AllGatherOp::getOpcode() || op == hlo::ReduceScatterOp::getOpcode() ||
          op == hlo::AllReduceOp::getOpcode() || op == hlo::AllToAllOp::getOpcode()) {
        values[inst.id()] = collective(inst, operand(0));
        continue;
      }
      for (int64_t r = 0; r < world; ++r) {
        std::vector<const HloArray *> in;
        for (int i = 0; i < inst.operand_ids_size(); ++i)
          in.push_back(&operand(i)[r]);
        out[r] = evaluate(inst, in, r);
      }
      values[inst.id()] = std::move(out);
    }
    return tuples.at(entry.root_id());
  }

  /// The combiner of a reduction's called computation (its root's opcode).
  Combine calledCombiner(const xla::HloInstructionProto &inst) const {
    const xla::HloComputationProto &comp = *computations.at(inst.called_computation_ids(0));
    return combinerOf(instructions.at(comp.root_id())->opcode());
  }
  /// Entry parameter `number` of `rank`.
  const HloArray &argument(int64_t rank, int64_t number) const { return args[rank].at(number); }

private:
  HloArray evaluate(const xla::HloInstructionProto &inst, const std::vector<const HloArray *> &in,
                    int64_t rank);
  std::vector<HloArray> collective(const xla::HloInstructionProto &inst,
                                   const std::vector<HloArray> &in);

  const xla::HloModuleProto &module;
  const std::vector<std::vector<HloArray>> &args;
  int64_t world;
  const HloCustomCall &customCall;
  std::map<int64_t, const xla::HloComputationProto *> computations;
  std::map<int64_t, const xla::HloInstructionProto *> instructions;
};

/// Copies block `from` of `src` along `dim` (blocks of `size` entries) to
/// block `to` of `dst`: the one data movement of all-gather, all-to-all and
/// reduce-scatter.
void copyBlock(const HloArray &src, int64_t from, HloArray &dst, int64_t to, int64_t dim,
               int64_t size) {
  Index ss = stridesOf(src.dims), ds = stridesOf(dst.dims), blockDims = src.dims;
  blockDims[dim] = size;
  forEachIndex(blockDims, [&](int64_t, const Index &idx) {
    Index s = idx, d = idx;
    s[dim] += from * size;
    d[dim] += to * size;
    dst.values[offsetOf(d, ds)] = src.values[offsetOf(s, ss)];
  });
}

std::vector<HloArray> Evaluator::collective(const xla::HloInstructionProto &inst,
                                            const std::vector<HloArray> &in) {
  std::vector<HloArray> out(world);
  for (const auto &group : inst.replica_groups()) {
    std::vector<int64_t> members(group.replica_ids().begin(), group.replica_ids().end());
    int64_t n = int64_t(members.size());
    for (int64_t m : members)
      if (m >= world)
        fail("HLO evaluator: {} names rank {} of a world of {}", inst.name(), m, world);
    const std::string &op = inst.opcode();
    if (op == hlo::AllGatherOp::getOpcode()) {
      int64_t dim = inst.dimensions(0);
      HloArray result = arrayOf(inst.shape());
      for (int64_t k = 0; k < n; ++k)
        copyBlock(in[members[k]], 0, result, k, dim, in[members[k]].dims[dim]);
      for (int64_t m : members)
        out[m] = result;
      continue;
    }
    if (op == hlo::AllToAllOp::getOpcode()) {
      // Member k's block j of the split dimension becomes member j's block k.
      int64_t dim = inst.dimensions(0), block = in[members[0]].dims[dim] / n;
      for (int64_t j = 0; j < n; ++j) {
        HloArray result = arrayOf(inst.shape());
        for (int64_t k = 0; k < n; ++k)
          copyBlock(in[members[k]], j, result, k, dim, block);
        out[members[j]] = std::move(result);
      }
      continue;
    }
    Combine combine = calledCombiner(inst);
    HloArray total = in[members[0]];
    for (int64_t k = 1; k < n; ++k)
      for (int64_t i = 0; i < total.size(); ++i)
        total.values[i] = combine(total.values[i], in[members[k]].values[i]);
    for (double &v : total.values)
      v = rounded(v, total.type);
    if (op == hlo::AllReduceOp::getOpcode()) {
      for (int64_t m : members)
        out[m] = total;
      continue;
    }
    // reduce-scatter: block k of the scatter dimension to member k.
    int64_t dim = inst.dimensions(0);
    for (int64_t k = 0; k < n; ++k) {
      HloArray block = arrayOf(inst.shape());
      copyBlock(total, k, block, 0, dim, block.dims[dim]);
      out[members[k]] = std::move(block);
    }
  }
  return out;
}

/// What one opcode's evaluation on one rank reads and writes: `out` comes
/// shaped as the instruction's result, and is rounded to its type after.
struct OpcodeArgs {
  const xla::HloInstructionProto &inst;
  const std::vector<const HloArray *> &in;
  HloArray &out;
  int64_t rank;
  const Evaluator &evaluator;
};
using OpcodeFn = void (*)(OpcodeArgs &);

void mapUnary(OpcodeArgs &a, double (*f)(double)) {
  for (int64_t i = 0; i < a.out.size(); ++i)
    a.out.values[i] = f(a.in[0]->values[i]);
}
void mapBinary(OpcodeArgs &a, double (*f)(double, double)) {
  for (int64_t i = 0; i < a.out.size(); ++i)
    a.out.values[i] = f(a.in[0]->values[i], a.in[1]->values[i]);
}

void evalParameter(OpcodeArgs &a) {
  const HloArray &arg = a.evaluator.argument(a.rank, a.inst.parameter_number());
  if (arg.dims != a.out.dims)
    fail("HLO evaluator: parameter {} of rank {} has the wrong shape",
         a.inst.parameter_number(), a.rank);
  a.out.values = arg.values;
}

void evalConstant(OpcodeArgs &a) {
  const xla::LiteralProto &lit = a.inst.literal();
  std::vector<double> v;
  for (float x : lit.f32s())
    v.push_back(x);
  for (int32_t x : lit.s32s())
    v.push_back(x);
  for (int64_t x : lit.s64s())
    v.push_back(double(x));
  for (uint32_t x : lit.u32s())
    v.push_back(x);
  for (bool x : lit.preds())
    v.push_back(x);
  for (float x : bf16LiteralValues(lit))
    v.push_back(x);
  if (int64_t(v.size()) != a.out.size())
    fail("HLO evaluator: {} has {} literal values for {} elements", a.inst.name(), v.size(),
         a.out.size());
  a.out.values = v;
}

void evalIota(OpcodeArgs &a) {
  int64_t dim = a.inst.dimensions(0);
  forEachIndex(a.out.dims, [&](int64_t flat, const Index &idx) { a.out.values[flat] = idx[dim]; });
}

void evalDivide(OpcodeArgs &a) {
  bool integer = a.out.type == xla::S32 || a.out.type == xla::S64;
  for (int64_t i = 0; i < a.out.size(); ++i) {
    double q = a.in[0]->values[i] / a.in[1]->values[i];
    a.out.values[i] = integer ? std::trunc(q) : q;
  }
}

void evalCompare(OpcodeArgs &a) {
  const std::string &dir = a.inst.comparison_direction();
  for (int64_t i = 0; i < a.out.size(); ++i) {
    double x = a.in[0]->values[i], y = a.in[1]->values[i];
    a.out.values[i] = dir == "EQ"   ? x == y
                      : dir == "NE" ? x != y
                      : dir == "GE" ? x >= y
                      : dir == "GT" ? x > y
                      : dir == "LE" ? x <= y
                                    : x < y;
  }
}

void evalSelect(OpcodeArgs &a) {
  for (int64_t i = 0; i < a.out.size(); ++i)
    a.out.values[i] = a.in[0]->values[i] != 0 ? a.in[1]->values[i] : a.in[2]->values[i];
}

void evalBroadcast(OpcodeArgs &a) {
  Index is = stridesOf(a.in[0]->dims);
  forEachIndex(a.out.dims, [&](int64_t flat, const Index &idx) {
    int64_t o = 0;
    for (int i = 0; i < a.inst.dimensions_size(); ++i)
      o += (a.in[0]->dims[i] == 1 ? 0 : idx[a.inst.dimensions(i)]) * is[i];
    a.out.values[flat] = a.in[0]->values[o];
  });
}

void evalTranspose(OpcodeArgs &a) {
  Index is = stridesOf(a.in[0]->dims);
  forEachIndex(a.out.dims, [&](int64_t flat, const Index &idx) {
    int64_t o = 0;
    for (int i = 0; i < a.inst.dimensions_size(); ++i)
      o += idx[i] * is[a.inst.dimensions(i)];
    a.out.values[flat] = a.in[0]->values[o];
  });
}

void evalConcatenate(OpcodeArgs &a) {
  int64_t dim = a.inst.dimensions(0), at = 0;
  Index os = stridesOf(a.out.dims);
  for (const HloArray *part : a.in) {
    forEachIndex(part->dims, [&](int64_t flat, const Index &idx) {
      Index o = idx;
      o[dim] += at;
      a.out.values[offsetOf(o, os)] = part->values[flat];
    });
    at += part->dims[dim];
  }
}

void evalSlice(OpcodeArgs &a) {
  Index is = stridesOf(a.in[0]->dims);
  forEachIndex(a.out.dims, [&](int64_t flat, const Index &idx) {
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      o += (a.inst.slice_dimensions(d).start() + idx[d] * a.inst.slice_dimensions(d).stride()) *
           is[d];
    a.out.values[flat] = a.in[0]->values[o];
  });
}

void evalDynamicSlice(OpcodeArgs &a) {
  Index is = stridesOf(a.in[0]->dims), start(a.out.dims.size());
  for (size_t d = 0; d < start.size(); ++d) // clamped into range, as XLA does
    start[d] = std::clamp<int64_t>(int64_t(a.in[1 + d]->values[0]), 0,
                                   a.in[0]->dims[d] - a.out.dims[d]);
  forEachIndex(a.out.dims, [&](int64_t flat, const Index &idx) {
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      o += (start[d] + idx[d]) * is[d];
    a.out.values[flat] = a.in[0]->values[o];
  });
}

void evalPad(OpcodeArgs &a) {
  std::fill(a.out.values.begin(), a.out.values.end(), a.in[1]->values[0]);
  Index os = stridesOf(a.out.dims);
  forEachIndex(a.in[0]->dims, [&](int64_t flat, const Index &idx) {
    Index o = idx;
    bool inside = true;
    for (size_t d = 0; d < o.size(); ++d) {
      const auto &p = a.inst.padding_config().dimensions(d);
      o[d] = p.edge_padding_low() + idx[d] * (p.interior_padding() + 1);
      inside &= o[d] >= 0 && o[d] < a.out.dims[d];
    }
    if (inside)
      a.out.values[offsetOf(o, os)] = a.in[0]->values[flat];
  });
}

void evalDot(OpcodeArgs &a) {
  const auto &dn = a.inst.dot_dimension_numbers();
  const HloArray &l = *a.in[0], &r = *a.in[1];
  Index lb(dn.lhs_batch_dimensions().begin(), dn.lhs_batch_dimensions().end());
  Index rb(dn.rhs_batch_dimensions().begin(), dn.rhs_batch_dimensions().end());
  Index lc(dn.lhs_contracting_dimensions().begin(), dn.lhs_contracting_dimensions().end());
  Index rc(dn.rhs_contracting_dimensions().begin(), dn.rhs_contracting_dimensions().end());
  auto freeDims = [](const Index &dims, const Index &x, const Index &y) {
    Index f;
    for (int64_t d = 0; d < int64_t(dims.size()); ++d)
      if (std::find(x.begin(), x.end(), d) == x.end() && std::find(y.begin(), y.end(), d) == y.end())
        f.push_back(d);
    return f;
  };
  Index lf = freeDims(l.dims, lb, lc), rf = freeDims(r.dims, rb, rc);
  Index ls = stridesOf(l.dims), rs = stridesOf(r.dims), cdims;
  for (int64_t d : lc)
    cdims.push_back(l.dims[d]);
  forEachIndex(a.out.dims, [&](int64_t flat, const Index &idx) {
    int64_t lo = 0, ro = 0, k = 0;
    for (size_t i = 0; i < lb.size(); ++i, ++k) {
      lo += idx[k] * ls[lb[i]];
      ro += idx[k] * rs[rb[i]];
    }
    for (int64_t d : lf)
      lo += idx[k++] * ls[d];
    for (int64_t d : rf)
      ro += idx[k++] * rs[d];
    double acc = 0;
    forEachIndex(cdims, [&](int64_t, const Index &c) {
      int64_t x = lo, y = ro;
      for (size_t i = 0; i < c.size(); ++i) {
        x += c[i] * ls[lc[i]];
        y += c[i] * rs[rc[i]];
      }
      acc += l.values[x] * r.values[y];
    });
    a.out.values[flat] = acc;
  });
}

void evalReduce(OpcodeArgs &a) {
  Combine combine = a.evaluator.calledCombiner(a.inst);
  std::fill(a.out.values.begin(), a.out.values.end(), a.in[1]->values[0]);
  Index os = stridesOf(a.out.dims);
  Index kept;
  for (int64_t d = 0; d < int64_t(a.in[0]->dims.size()); ++d)
    if (std::find(a.inst.dimensions().begin(), a.inst.dimensions().end(), d) ==
        a.inst.dimensions().end())
      kept.push_back(d);
  forEachIndex(a.in[0]->dims, [&](int64_t flat, const Index &idx) {
    int64_t o = 0;
    for (size_t i = 0; i < kept.size(); ++i)
      o += idx[kept[i]] * os[i];
    a.out.values[o] = combine(a.out.values[o], a.in[0]->values[flat]);
  });
}

[[noreturn]] void cannotEvaluate(const xla::HloInstructionProto &inst) {
  fail("HLO evaluator: cannot evaluate {} (opcode '{}')", inst.name(), inst.opcode());
}

// Embedding rows: gather / scatter-add of whole rows at ids [...]
// (index_vector_dim = the ids' rank, collapsed/inserted dimension 0); the
// only forms Kiln emits.
void evalGather(OpcodeArgs &a) {
  const auto &g = a.inst.gather_dimension_numbers();
  if (!(g.collapsed_slice_dims_size() == 1 && g.collapsed_slice_dims(0) == 0 &&
        g.start_index_map_size() == 1 && g.start_index_map(0) == 0 &&
        g.index_vector_dim() == int64_t(a.in[1]->dims.size()) && a.in[0]->dims.size() == 2))
    cannotEvaluate(a.inst);
  int64_t rows = a.in[0]->dims[0], width = a.in[0]->dims[1];
  for (int64_t i = 0; i < a.in[1]->size(); ++i) {
    int64_t id = std::clamp<int64_t>(int64_t(a.in[1]->values[i]), 0, rows - 1);
    for (int64_t j = 0; j < width; ++j)
      a.out.values[i * width + j] = a.in[0]->values[id * width + j];
  }
}

void evalScatter(OpcodeArgs &a) {
  const auto &s = a.inst.scatter_dimension_numbers();
  if (!(s.inserted_window_dims_size() == 1 && s.inserted_window_dims(0) == 0 &&
        s.scatter_dims_to_operand_dims_size() == 1 &&
        s.index_vector_dim() == int64_t(a.in[1]->dims.size()) && a.in[0]->dims.size() == 2))
    cannotEvaluate(a.inst);
  int64_t rows = a.in[0]->dims[0], width = a.in[0]->dims[1];
  Combine combine = a.evaluator.calledCombiner(a.inst);
  a.out.values = a.in[0]->values;
  for (int64_t i = 0; i < a.in[1]->size(); ++i) {
    int64_t id = int64_t(a.in[1]->values[i]);
    if (id < 0 || id >= rows) // out of bounds: skipped, as XLA does
      continue;
    for (int64_t j = 0; j < width; ++j)
      a.out.values[id * width + j] =
          combine(a.out.values[id * width + j], a.in[2]->values[i * width + j]);
  }
}

/// Each opcode the evaluator knows, by XLA's name.
const std::map<std::string, OpcodeFn, std::less<>> &opcodeTable() {
  static const std::map<std::string, OpcodeFn, std::less<>> table = {
      {"parameter", evalParameter},
      {hlo::ConstantOp::getOpcode().str(), evalConstant},
      {hlo::IotaOp::getOpcode().str(), evalIota},
      {hlo::ReplicaIdOp::getOpcode().str(),
       [](OpcodeArgs &a) { a.out.values[0] = double(a.rank); }},
      {hlo::AddOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapBinary(a, [](double x, double y) { return x + y; }); }},
      {hlo::SubtractOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapBinary(a, [](double x, double y) { return x - y; }); }},
      {hlo::MultiplyOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapBinary(a, [](double x, double y) { return x * y; }); }},
      {hlo::DivideOp::getOpcode().str(), evalDivide},
      {hlo::MaximumOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapBinary(a, [](double x, double y) { return std::max(x, y); }); }},
      {hlo::MinimumOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapBinary(a, [](double x, double y) { return std::min(x, y); }); }},
      {hlo::PowerOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapBinary(a, [](double x, double y) { return std::pow(x, y); }); }},
      {hlo::AndOp::getOpcode().str(),
       [](OpcodeArgs &a) {
         mapBinary(a, [](double x, double y) { return double(x != 0 && y != 0); });
       }},
      {hlo::ExpOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapUnary(a, [](double x) { return std::exp(x); }); }},
      {hlo::LogOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapUnary(a, [](double x) { return std::log(x); }); }},
      {hlo::RsqrtOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapUnary(a, [](double x) { return 1.0 / std::sqrt(x); }); }},
      {hlo::SqrtOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapUnary(a, [](double x) { return std::sqrt(x); }); }},
      {hlo::NegateOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapUnary(a, [](double x) { return -x; }); }},
      {hlo::CosineOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapUnary(a, [](double x) { return std::cos(x); }); }},
      {hlo::SineOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapUnary(a, [](double x) { return std::sin(x); }); }},
      {hlo::SignOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapUnary(a, [](double x) { return double((x > 0) - (x < 0)); }); }},
      // The rounding to the result type after every opcode is the conversion.
      {hlo::ConvertOp::getOpcode().str(),
       [](OpcodeArgs &a) { mapUnary(a, [](double x) { return x; }); }},
      {hlo::CompareOp::getOpcode().str(), evalCompare},
      {hlo::SelectOp::getOpcode().str(), evalSelect},
      {hlo::ReshapeOp::getOpcode().str(), [](OpcodeArgs &a) { a.out.values = a.in[0]->values; }},
      {hlo::BroadcastInDimOp::getOpcode().str(), evalBroadcast},
      {hlo::TransposeOp::getOpcode().str(), evalTranspose},
      {hlo::ConcatenateOp::getOpcode().str(), evalConcatenate},
      {hlo::SliceOp::getOpcode().str(), evalSlice},
      {hlo::DynamicSliceOp::getOpcode().str(), evalDynamicSlice},
      {hlo::PadOp::getOpcode().str(), evalPad},
      {hlo::DotGeneralOp::getOpcode().str(), evalDot},
      {hlo::ReduceOp::getOpcode().str(), evalReduce},
      {hlo::GatherOp::getOpcode().str(), evalGather},
      {hlo::ScatterOp::getOpcode().str(), evalScatter},
  };
  return table;
}

HloArray Evaluator::evaluate(const xla::HloInstructionProto &inst,
                             const std::vector<const HloArray *> &in, int64_t rank) {
  auto it = opcodeTable().find(inst.opcode());
  if (it == opcodeTable().end())
    cannotEvaluate(inst);
  HloArray out = arrayOf(inst.shape());
  OpcodeArgs args{inst, in, out, rank, *this};
  it->second(args);
  for (double &v : out.values)
    v = rounded(v, out.type);
  return out;
}

} // namespace

void checkEvaluable(const xla::HloModuleProto &module, const HloCustomCall &customCall) {
  for (const auto &comp : module.computations())
    for (const auto &inst : comp.instructions())
      if (inst.opcode() == hlo::CustomCallOp::getOpcode() && !customCall)
        fail("HLO evaluator: {} ({}) is a custom call and no kernel implementation was given",
             inst.name(), inst.custom_call_target());
}

std::vector<std::vector<HloArray>> evaluateHlo(const xla::HloModuleProto &module,
                                               const std::vector<std::vector<HloArray>> &args,
                                               const HloCustomCall &customCall) {
  checkEvaluable(module, customCall);
  if (args.empty())
    fail("HLO evaluator: no ranks to evaluate");
  return Evaluator(module, args, customCall).run();
}

} // namespace kiln::neuron
