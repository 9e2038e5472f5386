//===- NeuronManifest.h - manifest.json checked against its module -*- C++ -*-===//
//
// `kiln check-hlo` feeds the module and reads its results as manifest.json
// says; the manifest is input, so every field it reads is checked first
// against the module it describes: counts, indices, shapes, dtypes, roles,
// the grid and its axes, the batch, the outputs' parameters, and a bound on
// what evaluating every rank may allocate. A manifest kiln compile wrote
// passes; an edited one is an error naming the file and the field.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_NEURONMANIFEST_H
#define KILN_DRIVER_NEURONMANIFEST_H

#include "proto/hlo.pb.h"

#include "kiln/Support/SequenceLayout.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace kiln {

/// What evaluating every rank of a module may hold at most: the ranks'
/// arguments as the evaluator keeps them (8 bytes an element).
constexpr int64_t kMaxEvaluatedArgumentBytes = int64_t(8) << 30;

/// The manifest's dtype of an XLA element type ("float32", "bfloat16",
/// "int32", ...).
std::string manifestDtype(xla::PrimitiveType type);

/// The positive integer at `keys` (nested, e.g. {"target",
/// "neuron_max_communicators"}) of the manifest read from `path`; throws
/// kiln::Error naming the file and the field when it is missing or not one.
int64_t manifestPositive(const nlohmann::json &manifest, const std::string &path,
                         std::initializer_list<const char *> keys);

/// The order a runtime lays each input's sequence out in before slicing it
/// over cp: the manifest's optional batch.head_tail_chunks (none: natural),
/// checked even and dividing batch.seq_len; throws kiln::Error naming
/// `path` and the field otherwise.
SequenceLayout manifestSequenceLayout(const nlohmann::json &manifest, const std::string &path);

/// Throws kiln::Error naming `path` and the first field that does not
/// describe `module` (or a module without an entry computation).
void validateManifest(const nlohmann::json &manifest, const xla::HloModuleProto &module,
                      const std::string &path);

} // namespace kiln

#endif // KILN_DRIVER_NEURONMANIFEST_H
