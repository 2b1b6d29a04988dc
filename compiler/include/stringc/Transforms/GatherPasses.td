//===- GatherPasses.td ------------------------------------------*- tablegen -*-===//
//
// Passes: skip-n as a gather, commuting-generator factorisation, distinct offsets.
// Included by Passes.td.
//
// Default order (Pipeline.cpp): pe-skip-gather, pe-factor-generators,
// pe-distinct-offsets. pe-factor-generators runs before pe-distinct-offsets
// because it matches generator_exp(relative_positions(pos), L) directly.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_GATHER_PASSES_TD
#define STRINGC_TRANSFORMS_GATHER_PASSES_TD

include "mlir/Pass/PassBase.td"

def SkipGather : Pass<"pe-skip-gather", "::mlir::ModuleOp"> {
  let summary = "rewrites skip-n attention as a per-head shift of v";
  let description = [{
    With `mask(skip) skip_base(n)`, head `s` of query `i` sees only key
    `i - (n + s)`. A softmax over one key is exactly 1, so the output is that
    key's value, whatever `q`, `k` and `scale`:

    ```mlir
    attention(q, k, v) heads(H) mask(skip) skip_base(n)
      -> skip_gather(v) heads(H) skip_base(n)
    ```

    No scores, no softmax; rows with no key give 0, as before. `q` and `k`
    become dead and their producers are erased when nothing else uses them
    (the frozen `W_Q` / `W_K` projections and RoPE of the skip GPTs). Exact:
    the forward result is bit-identical, and the gradients of `q` and `k`
    were exact zeros. It fires on every skip-masked attention without a
    `rel` operand (with `rel` too: a one-key softmax ignores the score).
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "report every rewrite as a remark with its forward cost before and after">,
  ];
  let statistics = [
    Statistic<"numGathers", "attentions-gathered", "skip-n attentions rewritten as gathers">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def FactorGenerators : Pass<"pe-factor-generators", "::mlir::ModuleOp"> {
  let summary = "factors relative generator attention into absolute rotations";
  let description = [{
    For generators `L_k` that commute, `exp((p_j - p_i) . L) =
    exp(p_i . L)^T exp(p_j . L) = R(p_i)^T R(p_j)` (skew `L_k`), so
    `q_i^T R_ij k_j = (R(p_i) q_i)^T (R(p_j) k_j)`:

    ```mlir
    attention(q, k, v, generator_exp(relative_positions(pos), L))
      -> attention(apply_rotation(q, R), apply_rotation(k, R), v)
         with R = generator_exp(pos, L)   ([T, Dh, Dh], shared)
    ```

    `T` matrix exponentials instead of `T*T`, and attention without the
    per-pair rotation. Exact only when the generators commute structurally:
    a single generator (`K = 1`); then it fires by default. With `K >= 2`
    learned generators the compiler cannot know they commute: the rewrite
    is opt-in (`approximate`, `stringc --approximate`), and then warns and
    reports the error bound in terms of the commutator (docs/passes.md).
    The generators must come from `pe.skew` (skew by construction) for the
    rotation identity; other generators are left alone.
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "report every rewrite as a remark with its forward cost before and after">,
    Option<"approximate", "approximate", "bool", "false",
           "also factor K >= 2 generators that commute only approximately "
           "(changes results within the commutator bound)">,
  ];
  let statistics = [
    Statistic<"numFactored", "attentions-factored",
              "relative attentions rewritten with absolute rotations">,
    Statistic<"numApproximate", "approximate-factorings",
              "of which with K >= 2 generators (approximate)">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def DistinctOffsets : Pass<"pe-distinct-offsets", "::mlir::ModuleOp"> {
  let summary = "exponentiates each distinct relative offset once";
  let description = [{
    `generator_exp(relative_positions(pos), L)` exponentiates `T*T` offsets;
    when `pos` is a `pe.seq_positions` or `pe.grid_positions` (integer
    positions, exact functions of their attributes) the compiler evaluates
    them and keeps only the `U` distinct offsets (169 for a 7x7 grid, CLS
    included):

    ```mlir
    generator_exp(relative_positions(pos), L)
      -> pair_gather(generator_exp(offset_table, L), index)
    ```

    `offset_table` is the `[U, A]` table of the distinct offsets (first
    appearance in row-major `(i, j)` order) and `index[i*T + j]` the row of
    pair `(i, j)`. Exact: the same matrix exponentials of the same `f32`
    offsets, copied; the gradient of `L` sums the same terms grouped by
    offset. It does not fire when every offset is distinct (`U = T*T`).
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "report every rewrite as a remark with its forward cost before and after">,
  ];
  let statistics = [
    Statistic<"numTables", "offset-tables", "generator_exp ops rewritten over distinct offsets">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

#endif // STRINGC_TRANSFORMS_GATHER_PASSES_TD
