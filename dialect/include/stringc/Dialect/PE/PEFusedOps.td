//===- PEFusedOps.td ------------------------------------------*- tablegen -*-===//
//
// The pe dialect: ops introduced by hoisting and fusion (tables, fused
// kernels), with their backward ops. The passes pe-hoist, pe-fuse-attention
// and pe-fuse-epilogue (docs/passes.md) create them; the frontend never
// does. Each forward op states the composition of ordinary ops it equals.
// Included by PEOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PEFUSEDOPS_TD
#define STRINGC_DIALECT_PE_PEFUSEDOPS_TD

//===----------------------------------------------------------------------===//
// Hoisted tables (pe-hoist)
//===----------------------------------------------------------------------===//

def PE_RopeTableOp : PE_ComputeOp<"rope_table", [PE_Differentiable]> {
  let summary = "cos / sin table of the rotary angles";
  let description = [{
    With `theta_j(t) = sum_a pos[t, a] * freqs[j, a]`:

    ```
    table[t, j, 0] = cos(theta_j(t))
    table[t, j, 1] = sin(theta_j(t))
    ```

    Shapes (static): `pos` `[T, A]`, `freqs` `[P, A]` (`P` = `D/2` pairs);
    result `[T, P, 2]`. It depends on positions and parameters only, so
    pe-hoist computes it once per step and shares it between every
    `pe.rope_apply` with the same `pos` and `freqs` (Q and K of every layer).
    `rope(x, pos, freqs) = rope_apply(x, rope_table(pos, freqs))`.

    Differentiable in `freqs` (learned, `mixed` frequencies):
    `pe.rope_table_grad`; `pos` gets no gradient.

    ```mlir
    %t = pe.rope_table %pos, %freqs : tensor<50x2xf32>, tensor<32x2xf32> -> tensor<50x32x2xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$pos, PE_FloatTensor:$freqs);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $pos `,` $freqs attr-dict `:` type($pos) `,` type($freqs) `->`
    type($result)
  }];
}

def PE_RopeApplyOp : PE_ComputeOp<"rope_apply", [PE_Differentiable]> {
  let summary = "rotary embedding from a precomputed cos / sin table";
  let description = [{
    With `c = table[t, j, 0]`, `s = table[t, j, 1]` and `x0, x1` =
    `x[b, t, 2j], x[b, t, 2j+1]`:

    ```
    y[b, t, 2j]   = x0 c - x1 s            (inverse: x0 c + x1 s)
    y[b, t, 2j+1] = x0 s + x1 c            (inverse: -x0 s + x1 c)
    ```

    i.e. pair `j` multiplied by `[[c, -s], [s, c]]`, or by its transpose
    with `inverse(true)` (the x-gradient of the rotation). The entries are
    read as given: nothing assumes `c^2 + s^2 = 1`.

    Shapes: `x` `[B, T, D]` (`D` even), `table` static `[T, D/2, 2]`; the
    result has the type of `x`.

    ```mlir
    %y = pe.rope_apply %x, %t : tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>
    %dx = pe.rope_apply %dy, %t inverse(true) : tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$table,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $table (`inverse` `(` $inverse^ `)`)? attr-dict `:` type($x) `,`
    type($table) `->` type($result)
  }];
}

def PE_CayleyWeightOp : PE_ComputeOp<"cayley_weight", [PE_Differentiable]> {
  let summary = "the Cayley transform as a weight matrix, W = U^T";
  let description = [{
    `W = U^T` with `U = (I - S)(I + S)^-1`, so that `pe.linear %x, %W` (`y =
    x W`, row vectors) applies `U` to every token vector as `pe.cayley`
    does: `cayley(x, S) = linear(x, cayley_weight(S))`. pe-hoist builds it
    once per step per `S` (one factorisation), shared by Q and K, and the
    application becomes a GEMM. `I + S` must be invertible (always for a
    skew `S`; the kernels report a singular one).

    Shapes (static): `s` `[D, D]`; result `[D, D]`.

    ```mlir
    %w = pe.cayley_weight %s : tensor<64x64xf32> -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$s);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = "$s attr-dict `:` type($s) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Fused kernels (pe-fuse-attention, pe-fuse-epilogue)
//===----------------------------------------------------------------------===//

def PE_RopeAttentionOp : PE_ComputeOp<"rope_attention", [PE_DifferentiableSaving]> {
  let summary = "attention with RoPE on Q and K in its prologue";
  let description = [{
    `attention(rope_apply(q, table), rope_apply(k, table), v)` with the
    attributes of `pe.attention` (`heads`, `scale`, `mask`): the kernel
    rotates each (batch, head) tile of `q` and `k` as it loads it, so the
    rotated Q / K are never written out (docs/passes.md,
    pe-fuse-attention). `mask` is `none` or `causal` (a skip mask ignores
    `q` and `k`: plain `pe.attention`); no `rel`.

    Shapes: `q`, `k`, `v` `[B, T, D]` of one type, `table` static
    `[T, D/2, 2]` (`pe.rope_table`); the result has the type of `q`, and the
    optional `lse` (f32 `[B, heads, T]`, added by pe-autodiff) is the log-sum-exp
    of each query row's scores, as `pe.attention`'s.

    Differentiable in `q`, `k`, `v` (`pe.rope_attention_grad`); the table
    gets no gradient (pe-fuse-attention does not fire on a table that
    depends on a trainable parameter).

    ```mlir
    %o = pe.rope_attention %q, %k, %v, %t heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$q, PE_FloatTensor:$k,
                       PE_FloatTensor:$v, PE_FloatTensor:$table,
                       I64Attr:$heads, F64Attr:$scale, PE_MaskKindAttr:$mask);
  let results = (outs PE_FloatTensor:$result, PE_SavedTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $table `heads` `(` $heads `)` `scale` `(` $scale `)`
    `mask` `(` custom<EnumKeyword>($mask) `)` attr-dict `:`
    type($q) `,` type($k) `,` type($v) `,` type($table) `->` type($result)
    (`,` type($lse)^)?
  }];
}

def PE_LinearGeluOp : PE_ComputeOp<"linear_gelu", [PE_Differentiable]> {
  let summary = "dense layer with a GELU epilogue";
  let description = [{
    `pre = linear(x, w, b)` and `result = gelu(pre)` (erf form, or tanh
    form with `approximate(true)`) in one kernel. `pre`, the
    pre-activation, is the second result because the backward needs it
    (`gelu'(pre)`): it is kept rather than recomputed with a second GEMM.

    Shapes as `pe.linear`: `x` `[..., I]`, `w` `[I, O]`, `b` `[O]`
    (optional); both results `[..., O]`.

    ```mlir
    %y, %pre = pe.linear_gelu %x, %w, %b : tensor<?x50x64xf32>, tensor<64x128xf32>, tensor<128xf32> -> (tensor<?x50x128xf32>, tensor<?x50x128xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$w,
                       Optional<PE_FloatTensor>:$b,
                       DefaultValuedAttr<BoolAttr, "false">:$approximate);
  let results = (outs PE_FloatTensor:$result, PE_FloatTensor:$pre);
  let assemblyFormat = [{
    $x `,` $w (`,` $b^)? (`approximate` `(` $approximate^ `)`)? attr-dict `:`
    type($x) `,` type($w) (`,` type($b)^)? `->` `(` type($result) `,`
    type($pre) `)`
  }];
}

def PE_LinearResidualOp : PE_ComputeOp<"linear_residual", [PE_Differentiable]> {
  let summary = "dense layer added to a residual stream";
  let description = [{
    `y = residual + (x w + b)` (no `+ b` without `b`): `add(residual,
    linear(x, w, b))` in one kernel, the linear's result never stored
    apart (the CPU adds the residual as the GEMM's tiles are stored, the
    GPU enters it as the GEMM's accumulator, `C` with `beta = 1`).

    Shapes: `residual` of the result type `[..., O]`; `x`, `w`, `b` as in
    `pe.linear`.

    Its gradients are those of `pe.add` and `pe.linear`: `dresidual = dy`,
    `dx = linear_grad_input(dy, w)`, `dw = linear_grad_weight(x, dy)`,
    `db = sum_to(dy)`.

    ```mlir
    %y = pe.linear_residual %r, %x, %w, %b : tensor<?x50x64xf32>, tensor<?x50x128xf32>, tensor<128x64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$residual, PE_FloatTensor:$x,
                       PE_FloatTensor:$w, Optional<PE_FloatTensor>:$b);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $residual `,` $x `,` $w (`,` $b^)? attr-dict `:` type($residual) `,`
    type($x) `,` type($w) (`,` type($b)^)? `->` type($result)
  }];
}

def PE_LinearGradInputAccOp : PE_ComputeOp<"linear_grad_input_acc"> {
  let summary = "gradient of pe.linear with respect to its input, added to a prior sum";
  let description = [{
    `dx = prior + dy W^T`: `add(prior, linear_grad_input(dy, w))` in one
    kernel, the input gradient never stored apart. pe-fuse-residual
    creates it after pe-autodiff, where an activation read by several dense
    layers (Q, K and V of a block) sums their input gradients. A backward
    op: no gradient of its own.

    Shapes: `dy` and `w` as in `pe.linear_grad_input`; `prior` of the
    result type `[..., I]`.

    ```mlir
    %dx = pe.linear_grad_input_acc %prior, %dy, %w : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<64x64xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$prior, PE_FloatTensor:$dy, PE_FloatTensor:$w);
  let results = (outs PE_FloatTensor:$dx);
  let assemblyFormat = [{
    $prior `,` $dy `,` $w attr-dict `:` type($prior) `,` type($dy) `,` type($w) `->` type($dx)
  }];
}

def PE_LayerNormGradAccOp : PE_ComputeOp<"layer_norm_grad_acc"> {
  let summary = "gradient of pe.layer_norm, its input gradient added to a prior sum";
  let description = [{
    `pe.layer_norm_grad` whose `dx` is `prior + dx`: `add(prior,
    layer_norm_grad(x, gamma, dy).dx)` in one kernel, the layer norm's input
    gradient never stored apart; `dgamma` and `dbeta` as in
    `pe.layer_norm_grad`. pe-fuse-residual creates it after pe-autodiff,
    where the residual stream's gradient sums the gradient through a block's
    pre-norm with the one that skips it. A backward op: no gradient of its
    own.

    Shapes: `x`, `gamma`, `dy` and `epsilon` as in `pe.layer_norm_grad`;
    `prior` and `dx` the shape of `x`.

    ```mlir
    %dx, %dg, %db = pe.layer_norm_grad_acc %prior, %x, %g, %dy : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$prior, PE_FloatTensor:$x, PE_FloatTensor:$gamma,
                       PE_FloatTensor:$dy,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs PE_FloatTensor:$dx, PE_FloatTensor:$dgamma,
                      PE_FloatTensor:$dbeta);
  let assemblyFormat = [{
    $prior `,` $x `,` $gamma `,` $dy (`epsilon` `(` $epsilon^ `)`)? attr-dict `:`
    type($prior) `,` type($x) `,` type($gamma) `,` type($dy) `->`
    `(` type($dx) `,` type($dgamma) `,` type($dbeta) `)`
  }];
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

def PE_RopeTableGradOp : PE_ComputeOp<"rope_table_grad"> {
  let summary = "gradient of pe.rope_table with respect to the frequencies";
  let description = [{
    With `theta_j(t) = sum_a pos[t, a] freqs[j, a]` and `dy` the gradient of
    the table:

    ```
    dtheta_j(t)  = -sin(theta_j(t)) dy[t, j, 0] + cos(theta_j(t)) dy[t, j, 1]
    dfreqs[j, a] = sum_t pos[t, a] dtheta_j(t)
    ```

    Shapes (static): `pos` `[T, A]`, `freqs` `[P, A]`, `dy` `[T, P, 2]`;
    result `dfreqs` `[P, A]`.

    ```mlir
    %df = pe.rope_table_grad %pos, %freqs, %dt : tensor<50x2xf32>, tensor<32x2xf32>, tensor<50x32x2xf32> -> tensor<32x2xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$pos, PE_FloatTensor:$freqs,
                       PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$dfreqs);
  let assemblyFormat = [{
    $pos `,` $freqs `,` $dy attr-dict `:` type($pos) `,` type($freqs) `,`
    type($dy) `->` type($dfreqs)
  }];
}

def PE_RopeApplyGradTableOp : PE_ComputeOp<"rope_apply_grad_table"> {
  let summary = "gradient of pe.rope_apply with respect to its table";
  let description = [{
    Summed over the batch, with `x0, x1`, `dy0, dy1` the pair `j` of token
    `t`:

    ```
    dtable[t, j, 0] = sum_b (dy0 x0 + dy1 x1)
    dtable[t, j, 1] = sum_b (dy1 x0 - dy0 x1)     (inverse: dy0 x1 - dy1 x0)
    ```

    `inverse` is that of the forward `pe.rope_apply`. Shapes: `x`, `dy`
    `[B, T, D]` of one type; result `dtable` `[T, D/2, 2]`.

    ```mlir
    %dt = pe.rope_apply_grad_table %x, %dy : tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<50x32x2xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$dy,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse);
  let results = (outs PE_FloatTensor:$dtable);
  let assemblyFormat = [{
    $x `,` $dy (`inverse` `(` $inverse^ `)`)? attr-dict `:` type($x) `,`
    type($dy) `->` type($dtable)
  }];
}

def PE_CayleyWeightGradOp : PE_ComputeOp<"cayley_weight_grad"> {
  let summary = "gradient of pe.cayley_weight";
  let description = [{
    With `M = (I + S)^-1`, `U = (I - S) M` and `dw` the gradient of
    `W = U^T`: `dU = -(dS M + U dS M)`, so

    ```
    ds = -(M dw (I + U))^T
    ```

    (the same as `pe.cayley_grad`'s `ds = -sum_tokens (dy + dx) z^T` when
    `dw = sum_tokens x dy^T`). Valid for any `S` with `I + S` invertible.

    The optional `weight` is the forward's result `W` (pe-autodiff passes
    it): since `W = 2 M^T - I`, `M = (W^T + I) / 2` and the gradient needs
    no second factorisation of `I + S` (the CUDA kernels use it: one
    elementwise launch instead of the serial factor kernel; the CPU kernels
    may ignore it).

    Shapes (static): `s`, `dw`, `weight` `[D, D]`; result `ds` `[D, D]`.

    ```mlir
    %ds = pe.cayley_weight_grad %s, %dw weight %w : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$s, PE_FloatTensor:$dw,
                       Optional<PE_FloatTensor>:$weight);
  let results = (outs PE_FloatTensor:$ds);
  let assemblyFormat = [{
    $s `,` $dw (`weight` $weight^)? attr-dict `:` type($s) `,` type($dw)
    (`,` type($weight)^)? `->` type($ds)
  }];
}

def PE_RopeAttentionGradOp : PE_ComputeOp<"rope_attention_grad"> {
  let summary = "gradient of pe.rope_attention";
  let description = [{
    With `qr = rope_apply(q, table)`, `kr = rope_apply(k, table)` recomputed
    per (batch, head) tile and `dqr, dkr, dv = attention_grad(qr, kr, v, y,
    lse, dy)` (same `heads`, `scale`, `mask`):

    ```
    dq = rope_apply(dqr, table, inverse)
    dk = rope_apply(dkr, table, inverse)
    ```

    The rotated tiles are not stored between the forward and the backward
    (they are rotated again here); the probabilities are rebuilt from the
    forward's `lse`, `D_i = dy_i . y_i` from its result `y`.

    Operands `q`, `k`, `v` `[B, T, D]`, `table` `[T, D/2, 2]`, the forward's
    `y` `[B, T, D]` and `lse` `[B, heads, T]`, `dy` `[B, T, D]`; results `dq`,
    `dk`, `dv` of the type of `q`.

    ```mlir
    %dq, %dk, %dv = pe.rope_attention_grad %q, %k, %v, %t, %y, %lse, %dy heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x32x2xf32>, tensor<?x50x64xf32>, tensor<?x4x50xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$q, PE_FloatTensor:$k,
                       PE_FloatTensor:$v, PE_FloatTensor:$table,
                       PE_FloatTensor:$y, PE_FloatTensor:$lse,
                       PE_FloatTensor:$dy, I64Attr:$heads, F64Attr:$scale,
                       PE_MaskKindAttr:$mask);
  let results = (outs PE_FloatTensor:$dq, PE_FloatTensor:$dk,
                      PE_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $table `,` $y `,` $lse `,` $dy `heads` `(` $heads `)`
    `scale` `(` $scale `)` `mask` `(` custom<EnumKeyword>($mask) `)`
    attr-dict `:` type($q) `,` type($k) `,` type($v) `,` type($table) `,`
    type($y) `,` type($lse) `,` type($dy) `->`
    `(` type($dq) `,` type($dk) `,` type($dv) `)`
  }];
}

#endif // STRINGC_DIALECT_PE_PEFUSEDOPS_TD
