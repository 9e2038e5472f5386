//===- KilnAttrs.td - kiln dialect attributes --------------*- tablegen -*-===//
//
// Enumerated op settings as enum attributes, so that a misspelled value is a
// parse error naming the allowed cases rather than a string checked later.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ATTRS_TD
#define KILN_ATTRS_TD

include "kiln/Dialect/Kiln/IR/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Kiln_DecayTypeEnum : I32EnumAttr<"DecayType",
    "shape of the learning-rate decay (torchtitan's lr_scheduler.decay_type)", [
      I32EnumAttrCase<"linear", 0>,
      I32EnumAttrCase<"sqrt", 1>,
      I32EnumAttrCase<"cosine", 2>,
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_DecayTypeAttr : EnumAttr<Kiln_Dialect, Kiln_DecayTypeEnum, "decay_type"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // KILN_ATTRS_TD
