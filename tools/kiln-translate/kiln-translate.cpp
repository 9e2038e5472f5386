//===- kiln-translate.cpp - Kiln's mlir-translate -------------------------===//
//
// The translations out of the hlo dialect (--hlo-to-text, --hlo-to-proto)
// and the proto read back (--hlo-proto-to-text), as mlir-translate runs
// them, for lit tests and for inspecting what kiln compile writes.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/CustomKernels/Registry.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  kiln::registerCustomKernels();
  kiln::neuron::registerHloTranslations();
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "Kiln translation driver"));
}
