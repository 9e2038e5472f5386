//===- NeuronManifest.cpp - manifest.json checked against its module ------===//

#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Support/ClosedSets.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/SequenceLayout.h"

#include <set>

using json = nlohmann::json;

namespace kiln {
namespace {

/// Reads the fields of one manifest, each error naming the file and field.
class ManifestReader {
public:
  explicit ManifestReader(const std::string &path) : path(path) {}

  const json &field(const json &object, const std::string &name, const std::string &key) const {
    if (!object.is_object() || !object.contains(key))
      fail("check-hlo: {}: missing field '{}'", path, name);
    return object[key];
  }
  int64_t positive(const json &object, const std::string &name, const std::string &key) const {
    const json &v = field(object, name, key);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      fail("check-hlo: {}: '{}' must be a positive integer, got {}", path, name, v.dump());
    return v.get<int64_t>();
  }
  std::string string(const json &object, const std::string &name, const std::string &key) const {
    const json &v = field(object, name, key);
    if (!v.is_string())
      fail("check-hlo: {}: '{}' must be a string, got {}", path, name, v.dump());
    return v.get<std::string>();
  }
  /// A field that must hold `expected`, the entry's position (`order` says
  /// whose order: "manifest order", "result order").
  void position(const json &object, const std::string &name, const std::string &key,
                size_t expected, const char *order) const {
    const json &v = field(object, name, key);
    if (!v.is_number_integer() || v.get<int64_t>() != int64_t(expected))
      fail("check-hlo: {}: '{}' must be {} ({}), got {}", path, name, expected, order, v.dump());
  }
  const json &array(const json &object, const std::string &name, const std::string &key) const {
    const json &v = field(object, name, key);
    if (!v.is_array())
      fail("check-hlo: {}: '{}' must be an array, got {}", path, name, v.dump());
    return v;
  }
  std::vector<int64_t> dims(const json &object, const std::string &name,
                            const std::string &key) const {
    std::vector<int64_t> out;
    for (const json &d : array(object, name, key)) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("check-hlo: {}: '{}' must list non-negative integers, got {}", path, name,
             object[key].dump());
      out.push_back(d.get<int64_t>());
    }
    return out;
  }

  const std::string &path;
};

std::vector<int64_t> dimsOf(const xla::ShapeProto &shape) {
  return {shape.dimensions().begin(), shape.dimensions().end()};
}

std::string dimsText(const std::vector<int64_t> &dims) { return json(dims).dump(); }

} // namespace

std::string manifestDtype(xla::PrimitiveType t) {
  switch (t) {
  case xla::F32:
    return "float32";
  case xla::BF16:
    return "bfloat16";
  case xla::F16:
    return "float16";
  case xla::S32:
    return "int32";
  case xla::U32:
    return "uint32";
  case xla::S64:
    return "int64";
  case xla::PRED:
    return "bool";
  default:
    return xla::PrimitiveType_Name(t);
  }
}

int64_t manifestPositive(const json &manifest, const std::string &path,
                         std::initializer_list<const char *> keys) {
  ManifestReader r(path);
  const json *at = &manifest;
  std::string prefix; // "target." before "neuron_max_communicators"
  const char *const *last = keys.end() - 1;
  for (const char *const *key = keys.begin(); key != last; ++key) {
    at = &r.field(*at, prefix + *key, *key);
    prefix += std::string(*key) + ".";
  }
  return r.positive(*at, prefix + *last, *last);
}

SequenceLayout manifestSequenceLayout(const json &manifest, const std::string &path) {
  ManifestReader r(path);
  const json &batch = r.field(manifest, "batch", "batch");
  int64_t seq = r.positive(batch, "batch.seq_len", "seq_len");
  if (!batch.contains("head_tail_chunks"))
    return {};
  int64_t chunks = r.positive(batch, "batch.head_tail_chunks", "head_tail_chunks");
  if (!SequenceLayout::validChunks(chunks, seq))
    fail("check-hlo: {}: 'batch.head_tail_chunks' ({}) must be even (2 x the context-parallel "
         "degree) and divide 'batch.seq_len' ({})",
         path, chunks, seq);
  return {chunks};
}

void validateManifest(const json &manifest, const xla::HloModuleProto &module,
                      const std::string &path) {
  bool hasEntry = false;
  for (const auto &comp : module.computations())
    hasEntry |= comp.id() == module.entry_computation_id() && comp.instructions_size() > 0;
  const auto &program = module.host_program_shape();
  if (!hasEntry || program.result().element_type() != xla::TUPLE)
    fail("check-hlo: the module beside {} has no entry computation returning a tuple (is "
         "model.hlo.pb what kiln compile wrote?)",
         path);
  ManifestReader r(path);
  if (!manifest.is_object())
    fail("check-hlo: {}: expected a JSON object", path);

  // The grid: named axes whose sizes multiply to the world size.
  int64_t world = r.positive(manifest, "world_size", "world_size");
  int64_t product = 1;
  std::set<std::string> axes;
  const json &grid = r.array(manifest, "grid", "grid");
  if (grid.empty())
    fail("check-hlo: {}: 'grid' lists no axis", path);
  for (size_t a = 0; a < grid.size(); ++a) {
    std::string name = "grid[" + std::to_string(a) + "]";
    std::string axis = r.string(grid[a], name + ".axis", "axis");
    if (!axes.insert(axis).second)
      fail("check-hlo: {}: axis '{}' repeats in 'grid'", path, axis);
    int64_t size = r.positive(grid[a], name + ".size", "size");
    if (size > world || product * size > world)
      fail("check-hlo: {}: the grid's sizes multiply past world_size {}", path, world);
    product *= size;
  }
  if (product != world)
    fail("check-hlo: {}: the grid's sizes multiply to {}, not world_size {}", path, product,
         world);
  const json &batch = r.field(manifest, "batch", "batch");
  int64_t globalBatch = r.positive(batch, "batch.global", "global");
  int64_t microbatches =
      batch.contains("microbatches") ? r.positive(batch, "batch.microbatches", "microbatches") : 1;
  if (globalBatch % microbatches)
    fail("check-hlo: {}: 'batch.global' ({}) is not a multiple of 'batch.microbatches' ({})",
         path, globalBatch, microbatches);
  manifestSequenceLayout(manifest, path);
  std::string precision =
      r.string(r.field(manifest, "mixed_precision", "mixed_precision"), "mixed_precision.param",
               "param");
  if (!parseWord<PrecisionDtype>(precision))
    fail("check-hlo: {}: 'mixed_precision.param' must be one of {}, got '{}'", path,
         listWords<PrecisionDtype>(), precision);

  // Every entry parameter, in order, as the module has it.
  const json &params = r.array(manifest, "parameters", "parameters");
  if (int(params.size()) != program.parameters_size())
    fail("check-hlo: {}: 'parameters' lists {}, the module has {} entry parameters", path,
         params.size(), program.parameters_size());
  std::set<std::string> names;
  int64_t rankParams = 0, perRankElements = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const json &p = params[i];
    std::string at = "parameters[" + std::to_string(i) + "]";
    r.position(p, at + ".parameter", "parameter", i, "manifest order");
    std::string role = r.string(p, at + ".role", "role");
    std::string name = r.string(p, at + ".name", "name");
    if (role != "param" && role != "state" && role != "input" && role != "rank")
      fail("check-hlo: {}: '{}.role' must be param, state, input or rank, got '{}'", path, at,
           role);
    // A data input repeats once per microbatch (gradient accumulation).
    int64_t microbatch = 0;
    if (p.contains("microbatch")) {
      if (role != "input" || !p["microbatch"].is_number_integer() ||
          p["microbatch"].get<int64_t>() < 0 || p["microbatch"].get<int64_t>() >= microbatches)
        fail("check-hlo: {}: '{}.microbatch' must be an integer in [0, batch.microbatches = {}) "
             "on an input",
             path, at, microbatches);
      microbatch = p["microbatch"].get<int64_t>();
    }
    if (!names.insert(role + ":" + name + ":" + std::to_string(microbatch)).second)
      fail("check-hlo: {}: {} '{}' is listed twice", path, role, name);
    rankParams += role == "rank";
    const xla::ShapeProto &shape = program.parameters(int(i));
    std::vector<int64_t> dims = r.dims(p, at + ".shape", "shape");
    if (dims != dimsOf(shape))
      fail("check-hlo: {}: '{}.shape' ({}) is {} in the module", path, at, dimsText(dims),
           dimsText(dimsOf(shape)));
    std::string dtype = r.string(p, at + ".dtype", "dtype");
    if (dtype != manifestDtype(shape.element_type()))
      fail("check-hlo: {}: '{}.dtype' ({}) is {} in the module", path, at, dtype,
           manifestDtype(shape.element_type()));
    int64_t elements = 1;
    for (int64_t d : dims)
      elements *= d;
    perRankElements += elements;
    if (role == "rank")
      continue;
    std::vector<int64_t> whole = r.dims(p, at + ".whole_shape", "whole_shape");
    if (whole.size() != dims.size())
      fail("check-hlo: {}: '{}.whole_shape' {} has another rank than its shape {}", path, at,
           dimsText(whole), dimsText(dims));
    for (const json &s : r.array(p, at + ".split", "split")) {
      const json &dim = r.field(s, at + ".split.dim", "dim");
      if (!dim.is_number_integer() || dim.get<int64_t>() < 0 ||
          dim.get<int64_t>() >= int64_t(dims.size()))
        fail("check-hlo: {}: '{}.split.dim' {} is not a dimension of {}", path, at, dim.dump(),
             dimsText(dims));
      int64_t d = dim.get<int64_t>();
      if (r.positive(s, at + ".split.block", "block") != dims[size_t(d)])
        fail("check-hlo: {}: '{}.split.block' must be the per-rank size {} of dimension {}",
             path, at, dims[size_t(d)], d);
      int64_t blocks = 1;
      for (const json &axis : r.array(s, at + ".split.axes", "axes")) {
        if (!axis.is_string() || !axes.count(axis.get<std::string>()))
          fail("check-hlo: {}: '{}.split.axes' names {}, not an axis of the grid", path, at,
               axis.dump());
        for (const json &g : grid)
          if (g["axis"] == axis)
            blocks *= g["size"].get<int64_t>();
      }
      if (whole[size_t(d)] > dims[size_t(d)] * blocks)
        fail("check-hlo: {}: '{}.whole_shape' dimension {} ({}) exceeds its {} blocks of {}",
             path, at, d, whole[size_t(d)], blocks, dims[size_t(d)]);
    }
  }
  if (rankParams != 1)
    fail("check-hlo: {}: expected one parameter of role 'rank', found {}", path, rankParams);
  if (double(perRankElements) * double(world) * 8 > double(kMaxEvaluatedArgumentBytes))
    fail("check-hlo: {}: {} ranks of {} argument elements each would take {:.1f} GB to "
         "evaluate, over the {:.1f} GB the evaluator allows",
         path, world, perRankElements,
         double(perRankElements) * double(world) * 8 / 1e9,
         double(kMaxEvaluatedArgumentBytes) / 1e9);

  // Every result, in order; an updated parameter or state names an input of
  // that role and its shape.
  const json &outputs = r.array(manifest, "outputs", "outputs");
  const auto &results = program.result().tuple_shapes();
  if (int(outputs.size()) != results.size())
    fail("check-hlo: {}: 'outputs' lists {}, the module has {} results", path, outputs.size(),
         results.size());
  int64_t losses = 0, norms = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const json &o = outputs[i];
    std::string at = "outputs[" + std::to_string(i) + "]";
    r.position(o, at + ".index", "index", i, "result order");
    bool named = false;
    for (const char *role : {"param", "state"})
      if (o.is_object() && o.contains(role)) {
        std::string key = r.string(o, at + "." + role, role);
        named = true;
        size_t p = 0;
        while (p < params.size() &&
               !(params[p]["role"] == role && params[p]["name"] == key))
          ++p;
        if (p == params.size())
          fail("check-hlo: {}: '{}.{}' names '{}', which no parameter of that role is", path,
               at, role, key);
        if (dimsOf(results[int(i)]) != dimsOf(program.parameters(int(p))))
          fail("check-hlo: {}: '{}' ('{}') is {} in the module, its parameter {}", path, at, key,
               dimsText(dimsOf(results[int(i)])), dimsText(dimsOf(program.parameters(int(p)))));
      }
    if (o.is_object() && o.contains("output")) {
      std::string what = r.string(o, at + ".output", "output");
      named = true;
      if ((what == "loss" || what == "grad_norm") && results[int(i)].dimensions_size() != 0)
        fail("check-hlo: {}: '{}' ('{}') must be a scalar result", path, at, what);
      losses += what == "loss";
      norms += what == "grad_norm";
    }
    if (!named)
      fail("check-hlo: {}: '{}' names no param, state or output", path, at);
  }
  if (losses != 1 || norms != 1)
    fail("check-hlo: {}: 'outputs' must hold one 'loss' and one 'grad_norm', found {} and {}",
         path, losses, norms);
}

} // namespace kiln
