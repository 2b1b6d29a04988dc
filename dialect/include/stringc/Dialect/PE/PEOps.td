//===- PEOps.td - ops of the pe dialect --------------------*- tablegen -*-===//
//
// Type constraints shared by every op, then the op families, one file each:
// module-level declarations, network layers, positional encodings, gathers,
// fused ops. Each family's file holds its forward ops and, beside each, the
// backward ops that pe-autodiff builds where a vector-Jacobian product needs
// a kernel of its own (docs/autodiff.md, "Backward ops"); the family's C++
// (PE<Family>Ops.cpp) holds their verifiers, VJPs and costs.
//
// A backward op takes the operands of its forward op that the product reads,
// then `dy`, the gradient of the forward result (`attention_grad` takes the
// optional `rel` after `dy`). Each result `d<name>` is the gradient of the
// forward operand `<name>` and has its shape. Reductions over "the leading
// dimensions" include the batch.
//
// Assembly conventions of the compute ops: operands, then each op attribute
// as `name(value)` (attributes with a default are omitted when they hold it),
// then `:` the operand types `->` the result type. Ops without operands write
// `: result-type`; ops with several results write `-> (type, type)`. Enum attributes go through custom<EnumKeyword> (PEOps.cpp)
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
// A result a forward op returns only when pe-autodiff asks for it, for its
// backward op to read (pe.attention's log-sum-exp): optional, and not tied to
// an optional operand (scripts/gen_op_schema.py knows it by this name).
def PE_SavedTensor : Optional<PE_FloatTensor>;

// A compute op: pure, with a C++ verifier and a cost (its family's
// PE<Family>Ops.cpp).
class PE_ComputeOp<string mnemonic, list<Trait> traits = []>
    : PE_Op<mnemonic, !listconcat([Pure, DeclareOpInterfaceMethods<PE_CostOpInterface>],
                                  traits)> {
  let hasVerifier = 1;
}

// A forward compute op that can lie on a gradient path: it builds its
// vector-Jacobian product (its family's PE<Family>Ops.cpp) for the
// pe-autodiff pass. Ops without it are constants for autodiff.
defvar PE_Differentiable =
    DeclareOpInterfaceMethods<PE_DifferentiableOpInterface>;
// One that also returns, when asked, what its backward op reads
// (`withSavedResults`): the attention ops' log-sum-exp.
defvar PE_DifferentiableSaving =
    DeclareOpInterfaceMethods<PE_DifferentiableOpInterface, ["withSavedResults"]>;

include "stringc/Dialect/PE/PEModuleOps.td"
include "stringc/Dialect/PE/PELayerOps.td"
include "stringc/Dialect/PE/PEPositionOps.td"
include "stringc/Dialect/PE/PEGatherOps.td"
include "stringc/Dialect/PE/PEFusedOps.td"

#endif // STRINGC_DIALECT_PE_PEOPS_TD
