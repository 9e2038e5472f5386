//===- ManifestFuzzer.cpp - libFuzzer target: kiln check-hlo's manifest ----===//
//
// Any bytes as the manifest.json `kiln check-hlo` reads, validated against a
// fixed module (two ranks: an FSDP-split f32[4,8] parameter, its exp_avg,
// input_ids, the rank; the updated parameter and state, loss, grad norm):
// accepted, or refused with kiln::Error. The seed corpus' manifest.json
// describes that module exactly.

#include "FuzzInput.h"
#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

namespace {

void setShape(xla::ShapeProto *shape, xla::PrimitiveType type, std::vector<int64_t> dims) {
  shape->set_element_type(type);
  for (int64_t d : dims)
    shape->add_dimensions(d);
}

xla::HloModuleProto fixedModule() {
  xla::HloModuleProto module;
  xla::HloComputationProto *entry = module.add_computations();
  entry->set_id(1);
  module.set_entry_computation_id(1);
  struct Param {
    xla::PrimitiveType type;
    std::vector<int64_t> dims;
  };
  const Param params[] = {{xla::F32, {2, 8}}, {xla::F32, {2, 8}}, {xla::S32, {1, 8}},
                          {xla::S32, {}}};
  auto *program = module.mutable_host_program_shape();
  int64_t id = 2;
  for (const Param &p : params) {
    xla::HloInstructionProto *inst = entry->add_instructions();
    inst->set_id(id++);
    inst->set_opcode("parameter");
    setShape(inst->mutable_shape(), p.type, p.dims);
    setShape(program->add_parameters(), p.type, p.dims);
  }
  xla::ShapeProto *result = program->mutable_result();
  result->set_element_type(xla::TUPLE);
  setShape(result->add_tuple_shapes(), xla::F32, {2, 8});
  setShape(result->add_tuple_shapes(), xla::F32, {2, 8});
  setShape(result->add_tuple_shapes(), xla::F32, {});
  setShape(result->add_tuple_shapes(), xla::F32, {});
  return module;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const xla::HloModuleProto module = fixedModule();
  kiln::fuzz::MemoryFile file(data, size);
  try {
    kiln::validateManifest(kiln::parseJson(kiln::readFile(file.path()), "manifest.json"), module,
                           "manifest.json");
  } catch (const kiln::Error &) {
  }
  return 0;
}
