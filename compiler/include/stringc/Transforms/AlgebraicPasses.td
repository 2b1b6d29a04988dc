//===- AlgebraicPasses.td ------------------------------------------*- tablegen -*-===//
//
// Passes: algebraic rewrites of the encodings: spd-gate squaring, reflection to rotation,
// cancellation of orthogonal transforms, folding into W_Q/W_K.
// Included by Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_ALGEBRAIC_PASSES_TD
#define STRINGC_TRANSFORMS_ALGEBRAIC_PASSES_TD

include "mlir/Pass/PassBase.td"

// Every algebraic rewrite is exact in real arithmetic; in f32 the rewritten
// graph differs from the original by rounding only (docs/passes.md).
defvar PE_ExplainOption = Option<"explain", "explain", "bool", "false",
    "report every rewrite as a remark with its forward cost before and after">;

def SpdGateSquare : Pass<"pe-spd-gate-square", "::mlir::ModuleOp"> {
  let summary = "moves the SPD gate of K onto Q, squared";
  let description = [{
    `pe.spd_gate` multiplies each column `d` by `exp(gamma[d])`: a diagonal,
    so it commutes with the head split, and within every head
    `(D q')^T (D k') = q'^T D^2 k'`. The pass rewrites

    ```mlir
    attention(spd_gate(q', g), spd_gate(k', g), v)
      -> attention(spd_gate(q', scale(g, factor 2)), k', v)
    ```

    saving one gate over `[B, T, D]` per attention. It fires only when both
    gates take the same `gamma` value, `gamma` is `[D]` (a per-position
    `[T, D]` gate differs between query `i` and key `j`), the gated values
    have no use but the attention's `q` and `k`, and the attention has no
    `rel` operand (`q^T D R D k != q^T D^2 R k` for a rotation `R`).
  }];
  let options = [PE_ExplainOption];
  let statistics = [
    Statistic<"numSquared", "gates-squared", "attentions whose K gate moved onto Q">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def CancelOrthogonal : Pass<"pe-cancel-orthogonal", "::mlir::ModuleOp"> {
  let summary = "removes a Cayley transform applied to both Q and K of a head";
  let description = [{
    With `U = cayley(S)` orthogonal (`S` skew: `pe.skew` or
    `pe.sparse_skew`), `(U q)^T (U k) = q^T k`: a transform applied to both
    Q and K over the whole of each head cancels in the attention scores. The
    pass rewrites `attention(cayley(q', S), cayley(k', S), v)` into
    `attention(q', k', v)` and warns that the transform has no effect (the
    STRING order, `rope(cayley(x, S))`, does not cancel).

    It fires only when both transforms use the same `S` value, the attention
    has no `rel` operand, the transformed values have no other use, and `U`
    acts within each head: `heads = 1`, or a `pe.sparse_skew` whose every
    support entry `(i, j)` has `i / Dh == j / Dh`. With `explain`, an
    attention with a transform on Q and K that does not cancel gets a remark
    saying why.
  }];
  let options = [PE_ExplainOption];
  let statistics = [
    Statistic<"numCancelled", "transforms-cancelled", "attentions whose Q/K transform cancelled">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def FoldTransform : Pass<"pe-fold-transform", "::mlir::ModuleOp"> {
  let summary = "folds a Cayley transform of a linear layer into its weights";
  let description = [{
    `pe.cayley` applies `U` to every vector of the last dimension, so
    `U (W^T h + b) = (W U^T)^T h + U b`:

    ```mlir
    cayley(linear(h, W, b), S) -> linear(h, cayley(W, S), cayley(b, S))
    ```

    `U` is then applied to the `[I, O]` weight once per step instead of to
    every token. This is the STRING order (`rope(cayley(linear(h, W_Q), S))`).
    It fires only when the linear result has no other use.
  }];
  let options = [PE_ExplainOption];
  let statistics = [
    Statistic<"numFolded", "transforms-folded", "Cayley transforms folded into weights">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def ReflectionToRotation : Pass<"pe-reflection-to-rotation", "::mlir::ModuleOp"> {
  let summary = "rewrites two Householder reflections per pair as RoPE";
  let description = [{
    `H(a2) H(a1)` is the rotation by `2 (a2 - a1)`, and `a_i = pos . f_i`, so

    ```mlir
    householder(x, pos, f1, f2) -> rope(x, pos, scale(sub(f2, f1), factor 2))
    ```

    with mode `seq` for one position axis and `mixed` for two. Gradients
    still reach `f1` and `f2` through `sub` and `scale`. The derived
    frequencies are computed once per `(f1, f2)` pair and shared (Q and K).
  }];
  let options = [PE_ExplainOption];
  let statistics = [
    Statistic<"numRewritten", "reflections-rewritten", "householder ops rewritten as rope">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

#endif // STRINGC_TRANSFORMS_ALGEBRAIC_PASSES_TD
