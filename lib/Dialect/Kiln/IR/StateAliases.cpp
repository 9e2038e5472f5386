//===- StateAliases.cpp - The state a step updates -----------------------===//

#include "kiln/Dialect/Kiln/IR/StateAliases.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace kiln {

namespace {
/// "kiln.param=<key>" or "kiln.state=<name>", "" for any other value.
std::string stateRole(DictionaryAttr attrs) {
  if (attrs)
    for (llvm::StringLiteral key : {kParamAttr, kStateAttr})
      if (auto name = attrs.getAs<StringAttr>(key))
        return (key + "=" + name.getValue()).str();
  return "";
}
} // namespace

SmallVector<int64_t> updatedArguments(FunctionOpInterface fn) {
  llvm::StringMap<int64_t> argumentOf;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (std::string role = stateRole(fn.getArgAttrDict(i)); !role.empty())
      argumentOf[role] = i;
  SmallVector<int64_t> updated;
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    auto it = argumentOf.find(stateRole(fn.getResultAttrDict(i)));
    updated.push_back(it == argumentOf.end() ? -1 : it->second);
  }
  return updated;
}

} // namespace kiln
