//===- HloExport.h - The hlo dialect as XLA's HloModuleProto -----*- C++ -*-===//
//
// The translation of kiln-lower-to-hlo's output (a module whose one
// function is the entry computation, in the hlo dialect) to an
// `xla.HloModuleProto` (proto/hlo.proto), and of such a proto to XLA's HLO
// text. The text is printed from the proto, so the two artifacts cannot
// disagree and a .pb read back prints the same text.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_NEURON_HLOEXPORT_H
#define KILN_BACKEND_NEURON_HLOEXPORT_H

#include "proto/hlo.pb.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace kiln::neuron {

/// The entry function of `module` (hlo ops, func.return as the root tuple)
/// as an HloModuleProto named `name`: one computation per reduction
/// combiner and element type, then the entry. Parameters and results tagged
/// with the same kiln.param / kiln.state name alias (must-alias); named
/// parameters and results carry their NEFF tensor names (kNeffInputNames,
/// kNeffOutputNames). Errors are emitted on the op that cannot be exported.
mlir::FailureOr<xla::HloModuleProto> exportHloModule(mlir::ModuleOp module,
                                                     llvm::StringRef name);

/// The values of a bf16 literal (its `bf16s` bytes, two little-endian bytes
/// per value) as floats.
std::vector<float> bf16LiteralValues(const xla::LiteralProto &literal);

/// XLA's HLO text syntax of `module` (what --xla_dump_to writes).
std::string printHloText(const xla::HloModuleProto &module);

/// Registers kiln-translate's translations: --hlo-to-text, --hlo-to-proto
/// (from hlo dialect MLIR) and --hlo-proto-to-text (a serialized proto).
void registerHloTranslations();

} // namespace kiln::neuron

#endif // KILN_BACKEND_NEURON_HLOEXPORT_H
