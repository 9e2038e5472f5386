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

#endif // KILN_ATTRS_TD
