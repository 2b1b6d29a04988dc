//===- PEOps.td - ops of the pe dialect --------------------*- tablegen -*-===//
//
// Type constraints shared by every op, then the op families, one file each:
// module-level declarations, network layers, positional encodings, and the
// backward ops that pe-autodiff builds.
//
// Assembly conventions of the compute ops: operands, then each op attribute
// as `name(value)` (attributes with a default are omitted when they hold it),
// then `:` the operand types `->` the result type. Ops without operands write
// `: result-type`. Enum attributes go through custom<EnumKeyword> (PEOps.cpp)
// so that they print as `mask(causal)`, not `mask(<causal>)`.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PEOPS_TD
#define STRINGC_DIALECT_PE_PEOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "stringc/Dialect/PE/PEDialect.td"
include "stringc/Dialect/PE/PEEnums.td"
include "stringc/Dialect/PE/PEInterfaces.td"

// Element types are checked here; ranks and shapes by the C++ verifiers,
// which name the operand in their messages.
def PE_FloatTensor : RankedTensorOf<[F32]>;
def PE_IntTensor : RankedTensorOf<[I32]>;
def PE_ScalarTensor : 0DTensorOf<[F32]>;

// A compute op: pure, with a C++ verifier and a cost (PECost.cpp).
class PE_ComputeOp<string mnemonic, list<Trait> traits = []>
    : PE_Op<mnemonic, !listconcat([Pure, DeclareOpInterfaceMethods<PE_CostOpInterface>],
                                  traits)> {
  let hasVerifier = 1;
}

// A forward compute op that can lie on a gradient path: it builds its
// vector-Jacobian product (PEVJPLayer.cpp, PEVJPPosition.cpp) for the
// pe-autodiff pass. Ops without it are constants for autodiff.
defvar PE_Differentiable =
    DeclareOpInterfaceMethods<PE_DifferentiableOpInterface>;

include "stringc/Dialect/PE/PEModuleOps.td"
include "stringc/Dialect/PE/PELayerOps.td"
include "stringc/Dialect/PE/PEPositionOps.td"
include "stringc/Dialect/PE/PEGradOps.td"
include "stringc/Dialect/PE/PEGatherOps.td"
include "stringc/Dialect/PE/PEFusedOps.td"

#endif // STRINGC_DIALECT_PE_PEOPS_TD
