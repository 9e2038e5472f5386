//===- HloTranslate.cpp - kiln-translate's translations -------------------===//

#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

namespace kiln::neuron {

namespace {
void dialects(DialectRegistry &registry) {
  registry.insert<hlo::HloDialect, func::FuncDialect, KilnDialect>();
}
} // namespace

void registerHloTranslations() {
  static TranslateFromMLIRRegistration toText(
      "hlo-to-text", "XLA HLO text of an hlo dialect module",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        FailureOr<xla::HloModuleProto> proto = exportHloModule(module, "train_step");
        if (failed(proto))
          return failure();
        os << printHloText(*proto);
        return success();
      },
      dialects);
  static TranslateFromMLIRRegistration toProto(
      "hlo-to-proto", "Serialized xla.HloModuleProto of an hlo dialect module",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        FailureOr<xla::HloModuleProto> proto =
            exportHloModule(cast<ModuleOp>(op), "train_step");
        if (failed(proto))
          return failure();
        os << proto->SerializeAsString();
        return success();
      },
      dialects);
  static TranslateRegistration protoToText(
      "hlo-proto-to-text", "XLA HLO text of a serialized xla.HloModuleProto",
      [](const std::shared_ptr<llvm::SourceMgr> &sources, raw_ostream &os,
         MLIRContext *context) -> LogicalResult {
        const llvm::MemoryBuffer *buffer = sources->getMemoryBuffer(sources->getMainFileID());
        xla::HloModuleProto proto;
        if (!proto.ParseFromArray(buffer->getBufferStart(), int(buffer->getBufferSize())))
          return emitError(UnknownLoc::get(context), "not a serialized xla.HloModuleProto");
        os << printHloText(proto);
        return success();
      });
}

} // namespace kiln::neuron
