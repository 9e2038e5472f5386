//===- KilnAttrs.td - kiln dialect attributes --------------*- tablegen -*-===//
//
// Enumerated op settings as attributes over the closed sets of
// kiln/Support/ClosedSets.h, so that a misspelled value is a parse error
// naming the allowed words rather than a string checked later.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ATTRS_TD
#define KILN_ATTRS_TD

include "kiln/Dialect/Kiln/IR/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"

// A closed set of kiln/Support/ClosedSets.h as an attribute parameter: the
// enum and its words are declared there once (the passes' options and the
// runtime read them too); the attribute reads and prints the word.
class Kiln_ClosedSetParameter<string enum>
    : AttrParameter<"::kiln::" # enum, "one of the words of ::kiln::" # enum> {
  let parser = "::kiln::parseClosedSetWord<::kiln::" # enum # ">($_parser)";
  let printer = "$_printer << ::llvm::StringRef(::kiln::wordOf($_self))";
}

def Kiln_DecayTypeAttr : AttrDef<Kiln_Dialect, "DecayType"> {
  let mnemonic = "decay_type";
  let summary = "shape of the learning-rate decay (torchtitan's lr_scheduler.decay_type)";
  let description = [{
    `linear`, `sqrt` or `cosine`: the words of `kiln::DecayType`
    (kiln/Support/ClosedSets.h), the enum the pass option, the run config
    and the runtime's schedule use too.
  }];
  let parameters = (ins Kiln_ClosedSetParameter<"DecayType">:$value);
  let assemblyFormat = "`<` $value `>`";
  // An op's accessor returns the enum, as an EnumAttr's does.
  let returnType = "::kiln::DecayType";
  let convertFromStorage = "$_self.getValue()";
  let constBuilderCall = "::kiln::DecayTypeAttr::get($_builder.getContext(), $0)";
}

def Kiln_ShardingAttr : AttrDef<Kiln_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "How a value is split over the device grid (kiln::Sharding)";
  // A string, not a code block: the examples hold the code block's end.
  let description =
    "Per tensor dimension, the grid axes it is split over, by name (blocks in\n"
    "the order of the axes' coordinates; `{}`: whole); the axes over which it\n"
    "is a partial sum still to be reduced (`partial`, omitted when none); and,\n"
    "for an uneven FSDP2 split, each dimension's zero-padded size\n"
    "(`padded_to`, 0: unpadded; omitted when none is padded):\n\n"
    "```mlir\n"
    "#kiln.sharding<[{\"dp_replicate\", \"dp_shard\"}, {}]>\n"
    "#kiln.sharding<[{}, {}], partial = {\"tp\"}>\n"
    "#kiln.sharding<[{\"tp\", \"dp_shard\"}, {}], padded_to = [18, 0]>\n"
    "```\n\n"
    "An axis is used once. The value's rank and the module's grid axes\n"
    "(`kiln.grid_axes`) are checked where the attribute is attached\n"
    "(`kiln.sharding` on an argument or result, `kiln.shardings` on an op),\n"
    "after Shardy's TensorShardingAttr.";
  let parameters = (ins
    "::mlir::ArrayAttr":$dims,
    "::mlir::ArrayAttr":$partial,
    "::mlir::DenseI64ArrayAttr":$padded_to);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // KILN_ATTRS_TD
