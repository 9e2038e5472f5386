//===- KilnDialect.cpp - The kiln dialect and its attributes --------------===//

#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Recomputed.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Dialect/Kiln/IR/StateAliases.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;

#include "kiln/Dialect/Kiln/IR/KilnDialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnAttrs.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"
      >();
  registerAttributes();
}

void KilnDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kiln/Dialect/Kiln/IR/KilnAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Verification of the kiln.* attributes
//===----------------------------------------------------------------------===//

namespace {

/// The attributes that give an argument or a result its role; a value has at
/// most one, and within one function each (attribute, name) pair is unique.
constexpr StringLiteral kArgumentRoles[] = {kParamAttr, kInputAttr, kStateAttr, kGradAttr,
                                            kRankAttr};
constexpr StringLiteral kResultRoles[] = {kParamAttr, kStateAttr, kGradAttr, kOutputAttr};

/// Checks that `attr` (on argument or result `index` of `fn`) is a non-empty
/// string, the only role attribute of that value, and unique among the
/// function's arguments or results.
LogicalResult verifyRole(Operation *op, bool isResult, unsigned index, NamedAttribute attr,
                         ArrayRef<StringLiteral> roles) {
  const char *what = isResult ? "result" : "argument";
  auto fail = [&]() {
    return op->emitOpError() << what << " #" << index << ": '" << attr.getName().getValue()
                             << "' ";
  };
  if (!llvm::is_contained(roles, attr.getName().getValue()))
    return fail() << "is not a kiln attribute of function " << what << "s (known: "
                  << llvm::join(roles.begin(), roles.end(), ", ") << ")";
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn)
    return fail() << "is only meaningful on a function's " << what << "s";
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return fail() << "must be a non-empty string, got " << attr.getValue();
  auto dictOf = [&](unsigned i) {
    return isResult ? fn.getResultAttrDict(i) : fn.getArgAttrDict(i);
  };
  if (DictionaryAttr own = dictOf(index))
    for (StringLiteral other : roles)
      if (other != attr.getName().getValue() && own.get(other) &&
          other < attr.getName().getValue()) // report the pair once
        return fail() << "and '" << other << "' cannot both tag one " << what;
  // Data inputs repeat once per microbatch (kMicrobatchAttr).
  auto microbatch = [&](DictionaryAttr dict) {
    return isResult || !dict ? Attribute() : dict.get(kMicrobatchAttr);
  };
  unsigned count = isResult ? fn.getNumResults() : fn.getNumArguments();
  for (unsigned i = 0; i < count && i < index; ++i)
    if (DictionaryAttr dict = dictOf(i))
      if (dict.get(attr.getName()) == name && microbatch(dict) == microbatch(dictOf(index)))
        return fail() << "\"" << name.getValue() << "\" repeats " << what << " #" << i;
  return success();
}

/// Arguments and results numbered across a pipeline stage's functions.
constexpr StringLiteral kNumberedValues[] = {kTransferAttr, kCotangentAttr, kResidualAttr};

/// `attr` (one of kNumberedValues on argument or result `index` of a
/// function) must be an i64 >= 0 that no other argument, or result, of the
/// function carries under that name.
LogicalResult verifyTransfer(Operation *op, bool isResult, unsigned index, NamedAttribute attr) {
  const char *what = isResult ? "result" : "argument";
  StringAttr name = attr.getName();
  auto fn = dyn_cast<FunctionOpInterface>(op);
  auto number = dyn_cast<IntegerAttr>(attr.getValue());
  if (!fn || !number || !number.getType().isSignlessInteger(64) || number.getInt() < 0)
    return op->emitOpError() << what << " #" << index << ": '" << name.getValue()
                             << "' must be an i64 >= 0 on a function " << what;
  unsigned count = isResult ? fn.getNumResults() : fn.getNumArguments();
  for (unsigned i = 0; i < count && i < index; ++i)
    if ((isResult ? fn.getResultAttr(i, name) : fn.getArgAttr(i, name)) == number)
      return op->emitOpError() << what << " #" << index << ": '" << name.getValue() << "' "
                               << number.getInt() << " repeats " << what << " #" << i;
  return success();
}

} // namespace

namespace {
/// `attr` must be a sharding of a value of `type` over the module's grid.
LogicalResult verifySharding(Operation *op, Attribute attr, Type type, const Twine &what) {
  auto tensor = dyn_cast_if_present<RankedTensorType>(type);
  if (!tensor)
    return op->emitOpError() << what << ": '" << kShardingAttr << "' needs a ranked tensor";
  SmallVector<std::string> axes = gridAxisNames(op);
  if (axes.empty())
    return op->emitOpError() << what << ": '" << kShardingAttr
                             << "' needs a module with '" << kGridAxesAttr << "'";
  FailureOr<Sharding> sharding = Sharding::fromAttr(
      attr, tensor.getRank(), axes, [&] { return op->emitOpError() << what << ": "; });
  if (failed(sharding))
    return failure();
  for (int64_t d = 0; d < tensor.getRank(); ++d)
    if (sharding->padding(d) && sharding->padding(d) < tensor.getDimSize(d))
      return op->emitOpError() << what << ": 'padded_to' " << sharding->padding(d)
                               << " is below dimension " << d << " of " << tensor;
  return success();
}
} // namespace

LogicalResult KilnDialect::verifyRegionArgAttribute(Operation *op, unsigned region,
                                                    unsigned index, NamedAttribute attr) {
  if (attr.getName() == kShardingAttr) {
    // A function's type, not its entry block: a declaration has no block.
    Type type;
    if (auto fn = dyn_cast<FunctionOpInterface>(op))
      type = fn.getArgumentTypes()[index];
    else if (!op->getRegion(region).empty())
      type = op->getRegion(region).getArgument(index).getType();
    return verifySharding(op, attr.getValue(), type, "argument #" + Twine(index));
  }
  if (llvm::is_contained(kNumberedValues, attr.getName().getValue()))
    return verifyTransfer(op, /*isResult=*/false, index, attr);
  if (attr.getName() == kMicrobatchAttr) {
    auto fn = dyn_cast<FunctionOpInterface>(op);
    auto microbatch = dyn_cast<IntegerAttr>(attr.getValue());
    if (!fn || !fn.getArgAttr(index, kInputAttr) || !microbatch ||
        !microbatch.getType().isSignlessInteger(64) || microbatch.getInt() < 0)
      return op->emitOpError() << "argument #" << index << ": '" << kMicrobatchAttr
                               << "' must be an i64 >= 0 on a function argument tagged '"
                               << kInputAttr << "'";
    return success();
  }
  return verifyRole(op, /*isResult=*/false, index, attr, kArgumentRoles);
}

LogicalResult KilnDialect::verifyRegionResultAttribute(Operation *op, unsigned region,
                                                       unsigned index, NamedAttribute attr) {
  if (attr.getName() == kShardingAttr) {
    auto fn = dyn_cast<FunctionOpInterface>(op);
    if (!fn)
      return op->emitOpError() << "'" << kShardingAttr << "' is only meaningful on functions";
    return verifySharding(op, attr.getValue(), fn.getResultTypes()[index],
                          "result #" + Twine(index));
  }
  if (llvm::is_contained(kNumberedValues, attr.getName().getValue()))
    return verifyTransfer(op, /*isResult=*/true, index, attr);
  return verifyRole(op, /*isResult=*/true, index, attr, kResultRoles);
}

LogicalResult KilnDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kModelAttr) {
    if (!isa<ModuleOp>(op) || !isa<DictionaryAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a dictionary on a module";
    return success();
  }
  if (name == kGridAxesAttr) {
    auto axes = dyn_cast<ArrayAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !axes ||
        !llvm::all_of(axes, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitOpError() << "'" << name << "' must be a list of axis names on a module";
    return success();
  }
  if (name == kParallelLoopsAttr) {
    auto loops = dyn_cast<ArrayAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !loops ||
        !llvm::all_of(loops, [](Attribute a) { return isa<FlatSymbolRefAttr>(a); }))
      return op->emitOpError() << "'" << name << "' must be a list of function symbols on a module";
    return success();
  }
  if (name == kHeadTailChunksAttr) {
    auto chunks = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !chunks || !chunks.getType().isSignlessInteger(64) ||
        chunks.getInt() < 2 || chunks.getInt() % 2)
      return op->emitOpError() << "'" << name
                               << "' must be an even i64 >= 2 (2 x the context-parallel degree) "
                                  "on a module";
    return success();
  }
  if (name == kResultShardingAttr) {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    if (!list || list.size() != op->getNumResults())
      return op->emitOpError() << "'" << name << "' must hold one sharding per result";
    for (auto [i, sharding] : llvm::enumerate(list))
      if (failed(verifySharding(op, sharding, op->getResult(i).getType(),
                                "result #" + Twine(i))))
        return failure();
    return success();
  }
  if (name == kLoopShardingAttr) {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    if (!list || !llvm::all_of(list, [](Attribute a) { return isa<ArrayAttr>(a); }))
      return op->emitOpError() << "'" << name << "' must list the grid axes of each loop";
    return success();
  }
  if (name == kSavedAttr) {
    auto saved = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!saved || op->getDialect() != this)
      return op->emitOpError() << "'" << name
                               << "' must be an array<i64: result indices> on a kiln op";
    int64_t previous = -1;
    for (int64_t index : saved.asArrayRef()) {
      if (index <= previous || index >= int64_t(op->getNumResults()))
        return op->emitOpError() << "'" << name << "' = " << saved
                                 << " must list distinct result indices in [0, "
                                 << op->getNumResults() << ") in increasing order";
      previous = index;
    }
    return success();
  }
  if (name == kStageAttr) {
    auto stage = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !stage || !stage.getType().isSignlessInteger(64) ||
        stage.getInt() < 0)
      return op->emitOpError() << "'" << name << "' must be an i64 >= 0 on a function";
    return success();
  }
  if (name == kAccumulateAttr) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<AddOp>(op))
      return op->emitOpError() << "'" << name << "' must be a unit attribute on a kiln.add";
    return success();
  }
  if (name == kRecomputedAttr) {
    if (!isa<UnitAttr>(attr.getValue()) || op->getDialect() != this)
      return op->emitOpError() << "'" << name << "' must be a unit attribute on a kiln op";
    return success();
  }
  if (name == kInputOutputAliasAttr || name == kOutParamBuffersAttr) {
    auto fn = dyn_cast<FunctionOpInterface>(op);
    auto entries = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!fn || !entries)
      return op->emitOpError() << "'" << name << "' must be an array<i64> on a function";
    // One entry per result, or per out-parameter once bufferization made
    // the results arguments.
    int64_t count = entries.size(), args = fn.getNumArguments();
    if (fn.getNumResults() ? count != int64_t(fn.getNumResults()) : count > args)
      return op->emitOpError() << "'" << name << "' has " << count << " entries for "
                               << fn.getNumResults() << " results and " << args
                               << " arguments";
    for (int64_t a : entries.asArrayRef())
      if (a < -1 || a >= args)
        return op->emitOpError() << "'" << name << "' names argument " << a << " of " << args;
    return success();
  }
  return op->emitOpError() << "unknown kiln attribute '" << name << "' (known on ops: '"
                           << kSavedAttr << "', '" << kRecomputedAttr << "', '" << kLoopShardingAttr
                           << "', '" << kResultShardingAttr << "'; on functions: '" << kStageAttr
                           << "', '" << kInputOutputAliasAttr << "', '" << kOutParamBuffersAttr
                           << "'; on modules: '" << kModelAttr << "', '" << kGridAxesAttr << "', '"
                           << kParallelLoopsAttr << "', '" << kHeadTailChunksAttr << "')";
}
