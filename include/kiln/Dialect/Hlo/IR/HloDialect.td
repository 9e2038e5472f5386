//===- HloDialect.td - The hlo dialect ---------------------*- tablegen -*-===//

#ifndef KILN_HLO_DIALECT_TD
#define KILN_HLO_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Hlo_Dialect : Dialect {
  let name = "hlo";
  let cppNamespace = "::kiln::hlo";
  let summary = "A mirror of the XLA HLO instructions Kiln's Neuron backend emits";
  let description = [{
    One op per XLA HLO opcode Kiln needs, with XLA's attributes (dimension
    numbers, replica groups, channel ids), on builtin tensors of static
    shape. The entry computation is a `func.func` whose arguments are the
    HLO parameters and whose `func.return` is the root tuple; reductions
    name their combiner (`add`, `max`, ...) instead of carrying a region,
    and the translation to XLA writes one computation per combiner and
    element type. `kiln-lower-to-hlo` produces it; `kiln-translate` and
    `kiln compile` turn it into an `xla.HloModuleProto` and HLO text.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let useDefaultAttributePrinterParser = 1;
}

def Hlo_ComparisonDirection : I32EnumAttr<"ComparisonDirection",
    "XLA's comparison directions", [
      I32EnumAttrCase<"EQ", 0>, I32EnumAttrCase<"NE", 1>, I32EnumAttrCase<"GE", 2>,
      I32EnumAttrCase<"GT", 3>, I32EnumAttrCase<"LE", 4>, I32EnumAttrCase<"LT", 5>]> {
  let cppNamespace = "::kiln::hlo";
  let genSpecializedAttr = 0;
}
def Hlo_ComparisonDirectionAttr
    : EnumAttr<Hlo_Dialect, Hlo_ComparisonDirection, "comparison_direction">;

def Hlo_Combiner : I32EnumAttr<"Combiner",
    "The binary function a reduction applies (XLA's to_apply computation)", [
      I32EnumAttrCase<"add", 0>, I32EnumAttrCase<"max", 1>, I32EnumAttrCase<"min", 2>,
      I32EnumAttrCase<"mul", 3>]> {
  let cppNamespace = "::kiln::hlo";
  let genSpecializedAttr = 0;
}
def Hlo_CombinerAttr : EnumAttr<Hlo_Dialect, Hlo_Combiner, "combiner">;

#endif // KILN_HLO_DIALECT_TD
