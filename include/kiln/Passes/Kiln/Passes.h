//===- Passes.h - The kiln dialect's transforms ----------------*- C++ -*-===//
//
// Declarations generated from Passes.td (kiln to kiln: kernels, mixed
// precision, autodiff, checkpointing, the optimizer, dispatch, sharding):
// create<Name>() and create<Name>(const <Name>Options &) for every pass, and
// registerKilnTransformsPasses(). The pipeline is kiln/Pipeline/KilnPipeline.h.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_TRANSFORMS_PASSES_H
#define KILN_DIALECT_KILN_TRANSFORMS_PASSES_H

#include "kiln/Support/ClosedSetOption.h"

#include "mlir/Pass/Pass.h"

#include <memory>
#include <vector>

namespace kiln {

struct OverrideRule;

#define GEN_PASS_DECL
#include "kiln/Passes/Kiln/Passes.h.inc"

/// kiln-substitute-kernels with rules given as data (the driver's, from the
/// run config), in addition to any rule files `options` name.
std::unique_ptr<mlir::Pass> createSubstituteKernels(std::vector<OverrideRule> rules,
                                                    const SubstituteKernelsOptions &options);

#define GEN_PASS_REGISTRATION
#include "kiln/Passes/Kiln/Passes.h.inc"

} // namespace kiln

#endif // KILN_DIALECT_KILN_TRANSFORMS_PASSES_H
