//===- HloTestUtil.h - Per-rank modules lowered to HLO, for tests -*- C++ -*-===//
#ifndef KILN_TEST_UNIT_HLOTESTUTIL_H
#define KILN_TEST_UNIT_HLOTESTUTIL_H

#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Pipeline/KilnPipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

namespace kiln::test {

/// `module`, a per-rank program (what kiln-partition leaves), lowered to the
/// hlo dialect and exported from its function `func`; a failure is a test
/// failure and gives nothing.
inline std::optional<xla::HloModuleProto> perRankHlo(mlir::ModuleOp module, llvm::StringRef func) {
  mlir::PassManager pm(module.getContext());
  buildKilnPipeline(pm, KilnPipelineOptions(), LoweringStage::Hlo, LoweringStage::PerRank);
  if (mlir::failed(pm.run(module))) {
    ADD_FAILURE() << "lowering to HLO failed";
    return std::nullopt;
  }
  mlir::FailureOr<xla::HloModuleProto> proto = neuron::exportHloModule(module, func);
  if (mlir::failed(proto)) {
    ADD_FAILURE() << "exporting @" << func.str() << " failed";
    return std::nullopt;
  }
  return *proto;
}

} // namespace kiln::test

#endif // KILN_TEST_UNIT_HLOTESTUTIL_H
