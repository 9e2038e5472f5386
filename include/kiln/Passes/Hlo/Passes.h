//===- Passes.h - hlo to hlo transforms -------------------------*- C++ -*-===//
//
// Declarations generated from Passes.td: create<Name>() and
// create<Name>(const <Name>Options &) for every pass, and registerHloTransformsPasses().
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_HLO_TRANSFORMS_PASSES_H
#define KILN_DIALECT_HLO_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Passes/Hlo/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Passes/Hlo/Passes.h.inc"

} // namespace kiln

#endif // KILN_DIALECT_HLO_TRANSFORMS_PASSES_H
