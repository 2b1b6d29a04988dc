//===- PEEnums.td - enum attributes of the pe dialect ------*- tablegen -*-===//
//
// Enum-like op attributes: EnumAttrs over I32 enums. On their own (and in the
// generic op form) they read `#pe.mask<causal>`; the ops' custom assembly
// writes the bare keyword, `mask(causal)` (custom<EnumKeyword>, PEOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PEENUMS_TD
#define STRINGC_DIALECT_PE_PEENUMS_TD

include "mlir/IR/EnumAttr.td"
include "stringc/Dialect/PE/PEDialect.td"

class PE_I32Enum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  // The attribute is the EnumAttr below, not a specialised IntegerAttr.
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::pe";
}

class PE_EnumAttr<PE_I32Enum enumInfo, string mnemonic>
    : EnumAttr<PE_Dialect, enumInfo, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

def PE_MaskKind : PE_I32Enum<"MaskKind", "attention mask", [
  I32EnumAttrCase<"None", 0, "none">,
  I32EnumAttrCase<"Causal", 1, "causal">,
  I32EnumAttrCase<"Skip", 2, "skip">
]>;
def PE_MaskKindAttr : PE_EnumAttr<PE_MaskKind, "mask">;

def PE_RopeMode : PE_I32Enum<"RopeMode", "rotary embedding mode", [
  I32EnumAttrCase<"Seq", 0, "seq">,
  I32EnumAttrCase<"Axial", 1, "axial">,
  I32EnumAttrCase<"Mixed", 2, "mixed">
]>;
def PE_RopeModeAttr : PE_EnumAttr<PE_RopeMode, "rope_mode">;

def PE_FreqsKind : PE_I32Enum<"FreqsKind", "rotary frequency table layout", [
  I32EnumAttrCase<"Seq", 0, "seq">,
  I32EnumAttrCase<"Axial", 1, "axial">
]>;
def PE_FreqsKindAttr : PE_EnumAttr<PE_FreqsKind, "freqs_kind">;

#endif // STRINGC_DIALECT_PE_PEENUMS_TD
