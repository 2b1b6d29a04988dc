//===- FusionPasses.td ------------------------------------------*- tablegen -*-===//
//
// Passes: hoisting of position/parameter-only tables and kernel fusion.
// Included by Passes.td. docs/passes.md has one section per pass.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_FUSION_PASSES_TD
#define STRINGC_TRANSFORMS_FUSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def Hoist : Pass<"pe-hoist", "::mlir::ModuleOp"> {
  let summary = "computes position- and parameter-only tables once per step";
  let description = [{
    In every function of the module:
    - `pe.rope(x, pos, freqs)` becomes `pe.rope_apply(x, pe.rope_table(pos,
      freqs))`: the cos / sin table is computed once, not per call;
    - `pe.cayley(x, S)` becomes `pe.linear(x, pe.cayley_weight(S))`: one
      factorisation of `I + S` per `S`, the application a GEMM;
    - the new tables, and every other op that reads no activation (no
      function argument flows into it: positions, frequency tables, skew
      matrices, ...), are placed right after their operands' definitions
      and merged when they are the same op on the same operands with the
      same attributes, so Q and K of every layer share one table.
    Exact: the rewritten graph computes the same values (the fast kernels
    round the table to float once, as pe.rope's kernels already do).
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "report each rewrite as a remark (stringc --explain)">,
  ];
  let statistics = [
    Statistic<"numRopeSplit", "rope-split", "pe.rope ops split into table + apply">,
    Statistic<"numCayleySplit", "cayley-split", "pe.cayley ops split into weight + linear">,
    Statistic<"numMerged", "merged", "duplicate position/parameter-only ops merged">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def FuseAttention : Pass<"pe-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "fuses RoPE on Q and K into the attention kernel";
  let description = [{
    `pe.attention(pe.rope_apply(q, t), pe.rope_apply(k, t), v)` (the same
    table `t`, neither application `inverse`, each read only by this
    attention, mask `none` or `causal`, no `rel`) becomes
    `pe.rope_attention(q, k, v, t)`, whose kernel rotates each (batch,
    head) tile as it loads it: the rotated Q and K are never written out.
    Does not fire when the table depends on a trainable parameter (the
    fused backward gives no table gradient), nor for skip masks or `rel`.
    Exact up to float rounding order.
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "report each rewrite as a remark (stringc --explain)">,
  ];
  let statistics = [
    Statistic<"numFused", "fused", "attentions fused with their RoPE prologue">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def FuseEpilogue : Pass<"pe-fuse-epilogue", "::mlir::ModuleOp"> {
  let summary = "fuses GELU and residual-add epilogues into dense layers";
  let description = [{
    - `pe.gelu(pe.linear(x, w, b))`, the linear read only by the gelu,
      becomes `pe.linear_gelu(x, w, b)` (the activation and the kept
      pre-activation);
    - `pe.add(r, pe.linear(x, w, b))` (either order), the linear read only
      by the add, `r` of the result's type (no broadcast), becomes
      `pe.linear_residual(r, x, w, b)`: the residual is the GEMM's
      accumulator. The second linear of an MLP block reads a
      `pe.linear_gelu` and fuses too.
    Exact up to float rounding order.
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "report each rewrite as a remark (stringc --explain)">,
  ];
  let statistics = [
    Statistic<"numGelu", "linear-gelu", "linear + gelu fused">,
    Statistic<"numResidual", "linear-residual", "residual add + linear fused">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def FuseResidual : Pass<"pe-fuse-residual", "::mlir::ModuleOp"> {
  let summary = "fuses residual adds and gradient sums into the dense layers that feed them";
  let description = [{
    A default pass of `--target=cpu` packages, after pe-autodiff (on the
    training program):
    - the residual half of pe-fuse-epilogue: `pe.add(r, pe.linear(x, w,
      b))` (either order), the linear read only by the add, `r` of the
      result's type (no broadcast), becomes `pe.linear_residual(r, x, w,
      b)`;
    - `pe.add(p, pe.linear_grad_input(dy, w))` (either order), the input
      gradient read only by the add, `p` of the result's type, becomes
      `pe.linear_grad_input_acc(p, dy, w)` (the backward's sums over the
      dense layers that read one activation, Q, K and V);
    - `pe.add(p, pe.layer_norm_grad(x, g, dy).dx)` (either order), `dx`
      read only by the add, `p` of its type, `dgamma` and `dbeta` read only
      after the add, becomes `pe.layer_norm_grad_acc(p, x, g, dy)` (the
      residual stream's sums over a block's pre-norm and its skip).
    The CPU's kernels add `r` or `p` as the GEMM's tiles or the layer norm's
    rows are stored: the bits of the unfused graph, one pass over the
    activation fewer.
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "report each rewrite as a remark (stringc --explain)">,
  ];
  let statistics = [
    Statistic<"numResidual", "linear-residual", "residual add + linear fused">,
    Statistic<"numGradientSum", "gradient-sum", "gradient sum + linear_grad_input fused">,
    Statistic<"numNormGradientSum", "norm-gradient-sum",
              "gradient sum + layer_norm_grad fused">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def ClusterGemms : Pass<"pe-cluster-gemms", "::mlir::ModuleOp"> {
  let summary = "orders same-shaped independent dense-layer GEMMs next to each other";
  let description = [{
    A default pass of `--target=cuda` packages only, after pe-fuse-residual
    (on the training program). Pure reordering, numerics unchanged: in each
    function's block, a `pe.linear` without bias, `pe.linear_grad_input` or
    `pe.linear_grad_weight` moves up to just after the nearest earlier op of
    the same name, operand and result types when none of its operands is
    defined at or after that op (so not reading it); else, a `pe.linear`
    or `pe.linear_grad_input` moves down to just before the nearest later
    such op when none of its results is used before or by that op. The
    backward's weight gradients of Q, K and V (and vit_cayley's products
    with U) become consecutive, which the CUDA step program runs as one
    cuBLAS call (docs/cuda.md, "Grouped GEMMs").
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "report each move as a remark (stringc --explain)">,
  ];
  let statistics = [
    Statistic<"numHoisted", "hoisted", "GEMM ops moved up next to a twin">,
    Statistic<"numSunk", "sunk", "GEMM ops moved down next to a twin">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

def ClusterCayley : Pass<"pe-cluster-cayley", "::mlir::ModuleOp"> {
  let summary = "orders the layers' independent Cayley weights, skew builders, folded weights and their gradients next to each other";
  let description = [{
    A default pass of `--target=cuda` packages only, before
    pe-cluster-gemms. Pure reordering of side-effect-free ops, numerics
    unchanged: in each function's block, each `pe.cayley_weight` after the
    first of its operand type moves to just after the last one moved (the
    first when none), when what its operand needs that is not defined
    before that first op is only `pe.skew`, `pe.sparse_skew`,
    `pe.get_param` and `arith.constant` ops (its layer's skew builder and
    parameter), which move to just before that first op. The layers'
    Cayley weights become consecutive, and so do their skew builders, which
    the CUDA step program runs as one launch each (docs/cuda.md, "Kernel
    groups"). And each `pe.skew_grad` or `pe.sparse_skew_grad` before the
    last of its kind (name, types, attributes) moves to just before that
    last one when every user of its result comes after it: the layers'
    skew gradients become consecutive, one launch too. Then each
    `pe.cayley_weight_grad` likewise (its result is read by its layer's
    skew gradient, now at the end): the layers' Cayley weight gradients
    become consecutive, their first launches one launch.
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "report each move as a remark (stringc --explain)">,
  ];
  let statistics = [
    Statistic<"numMoved", "moved", "cayley_weight ops moved next to another">,
    Statistic<"numMovedGrads", "moved-grads",
              "skew gradients moved next to the last of their kind">,
    Statistic<"numMovedWeightGrads", "moved-weight-grads",
              "cayley_weight_grad ops moved next to the last of their kind">,
    Statistic<"numMovedProducts", "moved-products",
              "folded weights (W U) moved next to another">,
    Statistic<"numMovedFoldGrads", "moved-fold-grads",
              "folded weights' gradients moved next to the last of their kind">,
  ];
  let dependentDialects = ["::mlir::pe::PEDialect"];
}

#endif // STRINGC_TRANSFORMS_FUSION_PASSES_TD
