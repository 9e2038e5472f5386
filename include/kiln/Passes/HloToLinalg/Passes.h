//===- Passes.h - hlo to linalg (compiled mode) ------------------*- C++ -*-===//
//
// Declarations generated from Passes.td: create<Name>() and
// create<Name>(const <Name>Options &) for every pass, and registerHloToLinalgPasses().
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_HLOTOLINALG_PASSES_H
#define KILN_PASSES_HLOTOLINALG_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Passes/HloToLinalg/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Passes/HloToLinalg/Passes.h.inc"

} // namespace kiln

#endif // KILN_PASSES_HLOTOLINALG_PASSES_H
