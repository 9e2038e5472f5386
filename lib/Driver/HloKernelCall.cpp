//===- HloKernelCall.cpp - An HLO custom call run by its CPU kernel -------===//

#include "kiln/Driver/HloKernelCall.h"
#include "kiln/Backend/CPU/CpuKernelImpl.h"
#include "kiln/Dialect/Kiln/IR/KernelSpec.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include "mlir/AsmParser/AsmParser.h"

#include <nlohmann/json.hpp>

namespace kiln {

HloKernelCall HloKernelCall::parse(const std::string &instruction, const std::string &backendConfig,
                             mlir::MLIRContext &context) {
  nlohmann::json config = parseJson(backendConfig, instruction + " backend_config");
  HloKernelCall call;
  call.instruction = instruction;
  std::string kernel = config.value("kiln_kernel", "");
  call.impl = dynamic_cast<const CpuKernelImpl *>(lookupKernelSpec(kernel));
  if (!call.impl)
    fail("{} calls kernel '{}', which has no CPU implementation", instruction, kernel);
  call.options = llvm::dyn_cast_or_null<mlir::DictionaryAttr>(
      mlir::parseAttribute(config.value("kiln_options", "{}"), &context));
  if (!call.options)
    fail("{}: kiln_options is not an MLIR dictionary", instruction);
  call.backward = config.value("kiln_direction", "") == "backward";
  if (config.contains("kiln_operands")) {
    const nlohmann::json &positions = config["kiln_operands"];
    if (!positions.is_array())
      fail("{}: kiln_operands is not an array of operand positions", instruction);
    for (const nlohmann::json &p : positions) {
      if (!p.is_number_integer() || p.get<int64_t>() < 0)
        fail("{}: kiln_operands holds {}, not an operand position", instruction, p.dump());
      call.kilnOperands.push_back(p.get<size_t>());
    }
  }
  return call;
}

std::vector<Tensor> HloKernelCall::run(std::vector<Tensor> operands) const {
  if (!kilnOperands.empty()) {
    std::vector<Tensor> own;
    for (size_t p : kilnOperands) {
      if (p >= operands.size())
        fail("{}: kiln_operands names operand {} of a call with {}", instruction, p,
             operands.size());
      own.push_back(operands[p]);
    }
    operands = std::move(own);
  }
  llvm::SmallVector<Tensor> results;
  if (backward)
    impl->runBackward(options, operands, results);
  else
    impl->runForward(options, operands, results);
  return std::vector<Tensor>(results.begin(), results.end());
}

} // namespace kiln
