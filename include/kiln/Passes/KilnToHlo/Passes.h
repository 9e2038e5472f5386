//===- Passes.h - kiln to hlo, the Neuron lowering --------------*- C++ -*-===//
//
// Declarations generated from Passes.td: create<Name>() and
// create<Name>(const <Name>Options &) for every pass, and registerKilnToHloPasses().
//
//===----------------------------------------------------------------------===//
#ifndef KILN_CONVERSION_KILNTOHLO_PASSES_H
#define KILN_CONVERSION_KILNTOHLO_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Passes/KilnToHlo/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Passes/KilnToHlo/Passes.h.inc"

} // namespace kiln

#endif // KILN_CONVERSION_KILNTOHLO_PASSES_H
