//===- PEDialect.td - the pe dialect ----------------------*- tablegen -*-===//
//
// The dialect definition only; ops, enums and interfaces live in their own
// files (PEOps.td, PEEnums.td, PEInterfaces.td).
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PEDIALECT_TD
#define STRINGC_DIALECT_PE_PEDIALECT_TD

include "mlir/IR/OpBase.td"

def PE_Dialect : Dialect {
  let name = "pe";
  let cppNamespace = "::mlir::pe";
  let summary = "Tensor-level IR of stringc: transformers with structured "
                "positional encodings";
  let description = [{
    The `pe` dialect describes a whole model: its parameters (`pe.parameter`),
    optimizer (`pe.optimizer`) and training data (`pe.dataset`) at module
    level, and its forward computation in `func.func @forward` as a graph of
    value-semantics tensor ops. Positional encodings (RoPE, Householder
    reflections, Cayley transforms, generator exponentials, ...) are ops of
    their own so that passes can reason about them.

    Conventions shared by every op (see docs/dialect.md):
    - float tensors are `f32`, token ids and labels `i32`, all ranked;
    - only dimension 0 (the batch) of an activation may be dynamic; tables,
      parameters, positions and rotations are fully static;
    - activations are `[B, T, D]`; multi-head ops split `D` into `heads`
      contiguous slices of `Dh = D / heads`;
    - rotary pairs are interleaved: pair `j` is columns `(2j, 2j+1)`;
    - positions are `[T, A]` (`A` = 1 for sequences, 2 for grids, axis 0 the
      column `x`, axis 1 the row `y`).

    Function argument attribute `pe.input = "name"` names a model input and
    result attribute `pe.output = "name"` a model output; result attribute
    `pe.grad = "name"` (on `@gradients`, added by pe-autodiff) names the
    parameter whose gradient the result is. All must be non-empty strings.
  }];

  // Enum attributes (mask, rope mode, rope_freqs kind) use the generated
  // attribute parser and printer.
  let useDefaultAttributePrinterParser = 1;
  // `pe.input` / `pe.output` / `pe.grad` on func arguments and results are
  // checked.
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

// Base class of every pe op.
class PE_Op<string mnemonic, list<Trait> traits = []>
    : Op<PE_Dialect, mnemonic, traits>;

#endif // STRINGC_DIALECT_PE_PEDIALECT_TD
