//===- PEPositionOps.td - positional encodings -------------*- tablegen -*-===//
//
// Positions, frequency tables and the structured position-dependent
// transforms (RoPE, Householder reflections, Cayley transforms of skew
// matrices, exponentials of commuting generators, SPD gates, sinusoidal
// tables), each differentiable op followed by the backward op pe-autodiff
// builds for it. Included by PEOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PEPOSITIONOPS_TD
#define STRINGC_DIALECT_PE_PEPOSITIONOPS_TD

def PE_SeqPositionsOp : PE_ComputeOp<"seq_positions"> {
  let summary = "positions of a sequence";
  let description = [{
    `pos[t, 0] = 0` for the `special` leading tokens (`t < special`), then
    `pos[special + n, 0] = n` for `n` in `[0, length)`. Result
    `[special + length, 1]`. `length > 0`, `special >= 0` (default 0).

    A constant for autodiff: it has no operands and gets no gradient.

    ```mlir
    %pos = pe.seq_positions length(64) : tensor<64x1xf32>
    ```
  }];
  let arguments = (ins I64Attr:$length,
                       DefaultValuedAttr<I64Attr, "0">:$special);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    `length` `(` $length `)` (`special` `(` $special^ `)`)? attr-dict `:`
    type($result)
  }];
}

def PE_GridPositionsOp : PE_ComputeOp<"grid_positions"> {
  let summary = "positions of the patches of an image grid";
  let description = [{
    `pos[t] = (0, 0)` for the `special` leading tokens, then patch `n` of the
    `rows x cols` grid (row-major) at `pos[special + n] = (n % cols,
    n / cols)`: axis 0 is the column `x`, axis 1 the row `y`. Result
    `[special + rows*cols, 2]`. `rows, cols > 0`, `special >= 0` (default 0).
    Special tokens (CLS) thus get the identity rotation, as in RoPE-ViT.

    A constant for autodiff: it has no operands and gets no gradient.

    ```mlir
    %pos = pe.grid_positions rows(7) cols(7) special(1) : tensor<50x2xf32>
    ```
  }];
  let arguments = (ins I64Attr:$rows, I64Attr:$cols,
                       DefaultValuedAttr<I64Attr, "0">:$special);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    `rows` `(` $rows `)` `cols` `(` $cols `)` (`special` `(` $special^ `)`)?
    attr-dict `:` type($result)
  }];
}

def PE_RopeFreqsOp : PE_ComputeOp<"rope_freqs"> {
  let summary = "standard rotary frequency table";
  let description = [{
    Frequencies for the `dim / 2` interleaved pairs of a `dim`-wide vector
    split into `heads` heads of `Dh = dim / heads` columns. Pair `j` belongs
    to head `j / (Dh/2)` and is pair `i = j % (Dh/2)` of its head.

    - `kind(seq)`: result `[dim/2, 1]`, `freqs[j, 0] = base^(-2i/Dh)`
      (`Dh` even).
    - `kind(axial)`: result `[dim/2, 2]`. With `n = Dh/4` (`Dh` divisible by
      4), the first `n` pairs of each head turn with `x`, the last `n` with
      `y`: `freqs[j] = (base^(-4i/Dh), 0)` for `i < n`, `(0,
      base^(-4(i-n)/Dh))` otherwise (RoPE-ViT's axial frequencies).

    `dim > 0`, `heads > 0` dividing `dim`, `base > 0`.

    A constant for autodiff: it has no operands and gets no gradient (learned
    frequencies are parameters, differentiated through `pe.rope`).

    ```mlir
    %f = pe.rope_freqs kind(axial) dim(64) heads(4) base(1.000000e+02) : tensor<32x2xf32>
    ```
  }];
  let arguments = (ins PE_FreqsKindAttr:$kind, I64Attr:$dim, I64Attr:$heads,
                       F64Attr:$base);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    `kind` `(` custom<EnumKeyword>($kind) `)` `dim` `(` $dim `)`
    `heads` `(` $heads `)` `base` `(` $base `)` attr-dict `:` type($result)
  }];
}

def PE_RopeOp : PE_ComputeOp<"rope", [PE_Differentiable]> {
  let summary = "rotary position embedding";
  let description = [{
    Rotates interleaved pair `j` (columns `2j`, `2j+1`) of token `t` by
    `theta_j(t) = sum_a pos[t, a] * freqs[j, a]`:

    ```
    y[b, t, 2j]   = x[b, t, 2j] cos(theta_j(t)) - x[b, t, 2j+1] sin(theta_j(t))
    y[b, t, 2j+1] = x[b, t, 2j] sin(theta_j(t)) + x[b, t, 2j+1] cos(theta_j(t))
    ```

    Shapes: `x` `[B, T, D]` (`D` even), `pos` `[T, A]`, `freqs` `[D/2, A]`;
    the result has the type of `x`. `mode` records where the frequencies come
    from and fixes `A`: `seq` (1D RoPE, `A = 1`), `axial` (2D, `A = 2`,
    `pe.rope_freqs kind(axial)`: each pair turns with one axis), `mixed` (2D,
    `A = 2`, learned frequencies mixing both axes). The math is the same for
    all three.

    ```mlir
    %y = pe.rope %x, %pos, %freqs mode(axial) : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$pos,
                       PE_FloatTensor:$freqs, PE_RopeModeAttr:$mode);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $pos `,` $freqs `mode` `(` custom<EnumKeyword>($mode) `)` attr-dict
    `:` type($x) `,` type($pos) `,` type($freqs) `->` type($result)
  }];
}

def PE_RopeGradFreqsOp : PE_ComputeOp<"rope_grad_freqs"> {
  let summary = "gradient of pe.rope with respect to its frequencies";
  let description = [{
    With `theta_j(t) = sum_a pos[t, a] * freqs[j, a]`, `c = cos theta_j(t)`,
    `s = sin theta_j(t)`, and `x0 = x[b, t, 2j]`, `x1 = x[b, t, 2j+1]`
    (likewise `dy0`, `dy1`), the derivative of the rotation `R'(theta) =
    [[-s, -c], [c, -s]]` gives

    ```
    dtheta_j(t)  = sum_b (dy0 * (-x0 s - x1 c) + dy1 * (x0 c - x1 s))
                 = sum_b (dy1 * y0 - dy0 * y1)      (y = the forward output)
    dfreqs[j, a] = sum_t pos[t, a] * dtheta_j(t)
    ```

    The gradient with respect to `x` is `pe.rope` by the opposite angle
    (negated `freqs`); positions get none. Shapes as for `pe.rope`: `x` and
    `dy` `[B, T, D]` (`D` even), `pos` `[T, A]` (`A` in {1, 2}), `freqs`
    `[D/2, A]`; result `dfreqs` `[D/2, A]`.

    ```mlir
    %df = pe.rope_grad_freqs %x, %pos, %freqs, %dy : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32>, tensor<?x50x64xf32> -> tensor<32x2xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$pos,
                       PE_FloatTensor:$freqs, PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$dfreqs);
  let assemblyFormat = [{
    $x `,` $pos `,` $freqs `,` $dy attr-dict `:` type($x) `,` type($pos) `,`
    type($freqs) `,` type($dy) `->` type($dfreqs)
  }];
}

def PE_HouseholderOp : PE_ComputeOp<"householder", [PE_Differentiable]> {
  let summary = "reflection RoPE: two 2D Householder reflections per pair";
  let description = [{
    For token `t` and pair `j`, `a1 = sum_a pos[t, a] * f1[j, a]`,
    `a2 = sum_a pos[t, a] * f2[j, a]`, `H(a) = I - 2 v v^T` with
    `v = (cos a, sin a)`, and

    ```
    (y[b, t, 2j], y[b, t, 2j+1])^T = H(a2) H(a1) (x[b, t, 2j], x[b, t, 2j+1])^T
    ```

    `H(a2) H(a1)` is the rotation by `2 (a2 - a1)`. Shapes: `x` `[B, T, D]`
    (`D` even), `pos` `[T, A]` (`A` in {1, 2}), `f1`, `f2` `[D/2, A]`; the
    result has the type of `x`.

    ```mlir
    %y = pe.householder %x, %pos, %f1, %f2 : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32>, tensor<32x2xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$pos,
                       PE_FloatTensor:$f1, PE_FloatTensor:$f2);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $pos `,` $f1 `,` $f2 attr-dict `:` type($x) `,` type($pos) `,`
    type($f1) `,` type($f2) `->` type($result)
  }];
}

def PE_HouseholderGradFreqsOp : PE_ComputeOp<"householder_grad_freqs"> {
  let summary = "gradient of pe.householder with respect to its angles";
  let description = [{
    `H(a2) H(a1)` is the rotation by `phi = 2 (a2 - a1)`, with
    `a1 = sum_a pos[t, a] * f1[j, a]`, `a2 = sum_a pos[t, a] * f2[j, a]`.
    With `G_j(t)` the angle gradient of `pe.rope_grad_freqs` evaluated at
    `phi` (`c = cos phi`, `s = sin phi`):

    ```
    G_j(t)    = sum_b (dy0 * (-x0 s - x1 c) + dy1 * (x0 c - x1 s))
    df1[j, a] = -2 * sum_t pos[t, a] * G_j(t)
    df2[j, a] =  2 * sum_t pos[t, a] * G_j(t)
    ```

    Shapes as for `pe.householder`: `x` and `dy` `[B, T, D]` (`D` even),
    `pos` `[T, A]` (`A` in {1, 2}), `f1`, `f2` `[D/2, A]`; results `df1`,
    `df2` `[D/2, A]`.

    ```mlir
    %df1, %df2 = pe.householder_grad_freqs %x, %pos, %f1, %f2, %dy : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32>, tensor<32x2xf32>, tensor<?x50x64xf32> -> (tensor<32x2xf32>, tensor<32x2xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$pos,
                       PE_FloatTensor:$f1, PE_FloatTensor:$f2,
                       PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$df1, PE_FloatTensor:$df2);
  let assemblyFormat = [{
    $x `,` $pos `,` $f1 `,` $f2 `,` $dy attr-dict `:` type($x) `,`
    type($pos) `,` type($f1) `,` type($f2) `,` type($dy) `->` `(` type($df1)
    `,` type($df2) `)`
  }];
}

def PE_SkewOp : PE_ComputeOp<"skew", [PE_Differentiable]> {
  let summary = "skew-symmetric matrices from their upper triangles";
  let description = [{
    Parameter `k` of the last dimension is the upper-triangle pair `(i, j)`,
    `i < j`, in row-major order (`(0,1), (0,2), ..., (0,d-1), (1,2), ...`,
    the order of `torch.triu_indices(d, d, 1)`; `k = i*d - i(i+1)/2 +
    j - i - 1`):

    ```
    S[..., i, j] = params[..., k]
    S[..., j, i] = -params[..., k]
    S[..., i, i] = 0
    ```

    Shapes (static): `params` `[..., d(d-1)/2]` with `d = dim >= 2`; result
    `[..., d, d]`.

    ```mlir
    %s = pe.skew %p dim(64) : tensor<2016xf32> -> tensor<64x64xf32>
    %l = pe.skew %g dim(16) : tensor<2x120xf32> -> tensor<2x16x16xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$params, I64Attr:$dim);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $params `dim` `(` $dim `)` attr-dict `:` type($params) `->` type($result)
  }];
}

def PE_SkewGradOp : PE_ComputeOp<"skew_grad"> {
  let summary = "gradient of pe.skew";
  let description = [{
    With `(i, j)`, `i < j`, the upper-triangle pair of parameter `k` in the
    order of `pe.skew` (row-major, `k = i*d - i(i+1)/2 + j - i - 1`):
    `dparams[..., k] = dy[..., i, j] - dy[..., j, i]`.

    Shapes (static): `dy` `[..., d, d]` with `d = dim >= 2`; result
    `dparams` `[..., d(d-1)/2]`.

    ```mlir
    %dp = pe.skew_grad %dy dim(16) : tensor<2x16x16xf32> -> tensor<2x120xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$dy, I64Attr:$dim);
  let results = (outs PE_FloatTensor:$dparams);
  let assemblyFormat = [{
    $dy `dim` `(` $dim `)` attr-dict `:` type($dy) `->` type($dparams)
  }];
}

def PE_SparseSkewOp : PE_ComputeOp<"sparse_skew", [PE_Differentiable]> {
  let summary = "skew-symmetric matrix with a fixed sparse support";
  let description = [{
    As `pe.skew`, but only on the `K` upper-triangle positions listed in
    `support` (flat indices `k` in the order of `pe.skew`, strictly
    increasing, each in `[0, dim(dim-1)/2)`): with `(i_m, j_m)` the pair of
    `support[m]`,

    ```
    S[i_m, j_m] = params[m],  S[j_m, i_m] = -params[m],  0 elsewhere
    ```

    Shapes (static): `params` `[K]`, `K` = the length of `support`; result
    `[dim, dim]`, `dim >= 2`. `fraction` (in `(0, 1]`) and `seed` record
    how the frontend drew the support; the math depends on `support` only.

    ```mlir
    %s = pe.sparse_skew %p dim(4) fraction(5.000000e-01) seed(7) support([0, 2, 5]) : tensor<3xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$params, I64Attr:$dim, F64Attr:$fraction,
                       I64Attr:$seed, DenseI64ArrayAttr:$support);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $params `dim` `(` $dim `)` `fraction` `(` $fraction `)` `seed` `(` $seed `)`
    `support` `(` $support `)` attr-dict `:` type($params) `->` type($result)
  }];
}

def PE_SparseSkewGradOp : PE_ComputeOp<"sparse_skew_grad"> {
  let summary = "gradient of pe.sparse_skew";
  let description = [{
    With `(i_m, j_m)` the upper-triangle pair of `support[m]` (order of
    `pe.skew`): `dparams[m] = dy[i_m, j_m] - dy[j_m, i_m]`.

    `dim` and `support` are those of the forward op, with the same rules
    (`dim >= 2`; `support` non-empty, strictly increasing, in
    `[0, dim(dim-1)/2)`). Shapes (static): `dy` `[dim, dim]`; result
    `dparams` `[K]`, `K` the length of `support`.

    ```mlir
    %dp = pe.sparse_skew_grad %dy dim(4) support([0, 2, 5]) : tensor<4x4xf32> -> tensor<3xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$dy, I64Attr:$dim,
                       DenseI64ArrayAttr:$support);
  let results = (outs PE_FloatTensor:$dparams);
  let assemblyFormat = [{
    $dy `dim` `(` $dim `)` `support` `(` $support `)` attr-dict `:` type($dy)
    `->` type($dparams)
  }];
}

def PE_CayleyOp : PE_ComputeOp<"cayley", [PE_Differentiable]> {
  let summary = "applies the Cayley transform of a skew matrix";
  let description = [{
    `y[..., :] = U x[..., :]` with `U = (I - S)(I + S)^-1`, computed as a
    solve: `(I + S) z = x`, then `y = (I - S) z`. For skew-symmetric `S`,
    `I + S` is invertible and `U` orthogonal.

    Shapes: `x` `[..., D]`, `s` `[D, D]` (static); the result has the type
    of `x`.

    ```mlir
    %y = pe.cayley %x, %s : tensor<?x50x64xf32>, tensor<64x64xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$s);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $s attr-dict `:` type($x) `,` type($s) `->` type($result)
  }];
}

def PE_CayleyGradOp : PE_ComputeOp<"cayley_grad"> {
  let summary = "gradient of pe.cayley";
  let description = [{
    For each token vector `x_t` (every leading index of `x`), with
    `U = (I - S)(I + S)^-1` and `dy_t` the token's gradient:

    ```
    z_t = (I + S)^-1 x_t                       (a solve, as in the forward op)
    dx_t = U^T dy_t = (I + S)^-T (I - S)^T dy_t
         = (I - S)^-1 (I + S) dy_t              (S skew-symmetric)
    ds   = -sum_t (dy_t + dx_t) z_t^T
    ```

    `ds` is the gradient with respect to `s` as a full matrix (the chain
    through `pe.skew_grad` keeps its antisymmetric part). Shapes: `x` and
    `dy` `[..., D]`, `s` `[D, D]` (static); results `dx` (the shape of `x`)
    and `ds` `[D, D]`.

    ```mlir
    %dx, %ds = pe.cayley_grad %x, %s, %dy : tensor<?x50x64xf32>, tensor<64x64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64x64xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$s,
                       PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$dx, PE_FloatTensor:$ds);
  let assemblyFormat = [{
    $x `,` $s `,` $dy attr-dict `:` type($x) `,` type($s) `,` type($dy) `->`
    `(` type($dx) `,` type($ds) `)`
  }];
}

def PE_RelativePositionsOp : PE_ComputeOp<"relative_positions"> {
  let summary = "pairwise position differences";
  let description = [{
    `r[i, j, :] = pos[j, :] - pos[i, :]`. Shapes: `pos` `[T, A]`; result
    `[T, T, A]`.

    A constant for autodiff: positions are constants, so no gradient flows
    through it (it does not implement `DifferentiableOpInterface`;
    pe-autodiff rejects a model where it depends on a trainable parameter).

    ```mlir
    %r = pe.relative_positions %pos : tensor<50x2xf32> -> tensor<50x50x2xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$pos);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = "$pos attr-dict `:` type($pos) `->` type($result)";
}

def PE_GeneratorExpOp : PE_ComputeOp<"generator_exp", [PE_Differentiable]> {
  let summary = "matrix exponential of a combination of generators";
  let description = [{
    `R[...] = exp(sum_k r[..., k] * generators[k])`, the matrix exponential.
    With skew-symmetric generators `R` is a rotation; when they commute,
    `R(r_i)^T R(r_j) = R(r_j - r_i)`.

    Shapes (static): `r` `[..., K]`, `generators` `[K, d, d]`; result
    `[..., d, d]`.

    ```mlir
    %R = pe.generator_exp %r, %L : tensor<50x50x2xf32>, tensor<2x16x16xf32> -> tensor<50x50x16x16xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$r, PE_FloatTensor:$generators);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $r `,` $generators attr-dict `:` type($r) `,` type($generators) `->`
    type($result)
  }];
}

def PE_GeneratorExpGradOp : PE_ComputeOp<"generator_exp_grad"> {
  let summary = "gradient of pe.generator_exp with respect to the generators";
  let description = [{
    For each leading index `p` of `r`, with `A = sum_k r[p, k] L_k`
    (`L_k = generators[k]`) and `dR = dy[p]`, the adjoint of the Frechet
    derivative of the matrix exponential at `A`, which is its Frechet
    derivative at `A^T` applied to `dR`, computed exactly by the
    block-triangular method:

    ```
    dA(p)   = top-right d x d block of exp([[A^T, dR], [0, A^T]])
    dL_k    = sum_p r[p, k] * dA(p)
    ```

    `r` (relative positions) gets no gradient. Shapes (static): `r`
    `[..., K]`, `generators` `[K, d, d]`, `dy` `[..., d, d]` (the forward
    result); result `dgenerators` `[K, d, d]`.

    ```mlir
    %dL = pe.generator_exp_grad %r, %L, %dy : tensor<50x50x2xf32>, tensor<2x16x16xf32>, tensor<50x50x16x16xf32> -> tensor<2x16x16xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$r, PE_FloatTensor:$generators,
                       PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$dgenerators);
  let assemblyFormat = [{
    $r `,` $generators `,` $dy attr-dict `:` type($r) `,` type($generators)
    `,` type($dy) `->` type($dgenerators)
  }];
}

def PE_ApplyRotationOp : PE_ComputeOp<"apply_rotation", [PE_Differentiable]> {
  let summary = "per-token rotation of every head";
  let description = [{
    Head slice `h` of token `t` (columns `h*Dh .. (h+1)*Dh - 1`, `Dh = D /
    heads`) is multiplied by `rotations[t]`:
    `y[b, t, h*Dh + m] = sum_n rotations[t, m, n] * x[b, t, h*Dh + n]`.

    Shapes: `x` `[B, T, D]`, `rotations` `[T, Dh, Dh]` (static); the result
    has the type of `x`.

    ```mlir
    %y = pe.apply_rotation %x, %R heads(4) : tensor<?x50x64xf32>, tensor<50x16x16xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$rotations,
                       I64Attr:$heads);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $rotations `heads` `(` $heads `)` attr-dict `:` type($x) `,`
    type($rotations) `->` type($result)
  }];
}

def PE_ApplyRotationGradOp : PE_ComputeOp<"apply_rotation_grad"> {
  let summary = "gradient of pe.apply_rotation";
  let description = [{
    With `x_h`, `dy_h` the head-`h` slices of token `t` (columns
    `h*Dh .. (h+1)*Dh - 1`, `Dh = D / heads`) and `R[t] = rotations[t]`:

    ```
    dx_h(b, t)             = R[t]^T dy_h(b, t)
    drotations[t, m, n]    = sum_{b, h} dy[b, t, h*Dh + m] * x[b, t, h*Dh + n]
    ```

    Shapes as for `pe.apply_rotation`: `x` and `dy` `[B, T, D]`,
    `rotations` `[T, Dh, Dh]` (static); results `dx` (the shape of `x`) and
    `drotations` `[T, Dh, Dh]`.

    ```mlir
    %dx, %dR = pe.apply_rotation_grad %x, %R, %dy heads(4) : tensor<?x50x64xf32>, tensor<50x16x16xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<50x16x16xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$rotations,
                       PE_FloatTensor:$dy, I64Attr:$heads);
  let results = (outs PE_FloatTensor:$dx, PE_FloatTensor:$drotations);
  let assemblyFormat = [{
    $x `,` $rotations `,` $dy `heads` `(` $heads `)` attr-dict `:` type($x)
    `,` type($rotations) `,` type($dy) `->` `(` type($dx) `,`
    type($drotations) `)`
  }];
}

def PE_CommutatorNormOp : PE_ComputeOp<"commutator_norm", [PE_Differentiable]> {
  let summary = "largest commutator of a set of generators";
  let description = [{
    `y = max_{a < b} || L_a L_b - L_b L_a ||_F` over the generators
    `L_k = generators[k]`, a regulariser that drives them to commute.

    Shapes: `generators` `[K, d, d]` (static, `K >= 2`); result
    `tensor<f32>`.

    ```mlir
    %c = pe.commutator_norm %L : tensor<2x16x16xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$generators);
  let results = (outs PE_ScalarTensor:$result);
  let assemblyFormat = [{
    $generators attr-dict `:` type($generators) `->` type($result)
  }];
}

def PE_CommutatorNormGradOp : PE_ComputeOp<"commutator_norm_grad"> {
  let summary = "gradient of pe.commutator_norm";
  let description = [{
    Flows through the first maximising pair `(a, b)`, `a < b`, in row-major
    pair order (`(0,1), (0,2), ..., (1,2), ...`). With `L_k =
    generators[k]`, `C = L_a L_b - L_b L_a` and `G = dy * C / ||C||_F`:

    ```
    dgenerators[a] = G L_b^T - L_b^T G
    dgenerators[b] = L_a^T G - G L_a^T
    dgenerators[k] = 0                     (k not in {a, b})
    ```

    and everything is 0 when `C = 0`. Shapes: `generators` `[K, d, d]`
    (static, `K >= 2`), `dy` `tensor<f32>`; result `dgenerators` the shape
    of `generators`.

    ```mlir
    %dL = pe.commutator_norm_grad %L, %dy : tensor<2x16x16xf32>, tensor<f32> -> tensor<2x16x16xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$generators, PE_ScalarTensor:$dy);
  let results = (outs PE_FloatTensor:$dgenerators);
  let assemblyFormat = [{
    $generators `,` $dy attr-dict `:` type($generators) `,` type($dy) `->`
    type($dgenerators)
  }];
}

def PE_SpdGateOp : PE_ComputeOp<"spd_gate", [PE_Differentiable]> {
  let summary = "diagonal positive gate (the SPD factor of polar RoPE)";
  let description = [{
    `y[b, t, d] = x[b, t, d] * exp(gamma[d])` for `gamma` `[D]`, or
    `x[b, t, d] * exp(gamma[t, d])` for a per-position `gamma` `[T, D]`.
    Shapes: `x` `[B, T, D]`; the result has the type of `x`.

    ```mlir
    %y = pe.spd_gate %x, %gamma : tensor<?x64x32xf32>, tensor<32xf32> -> tensor<?x64x32xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$gamma);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $gamma attr-dict `:` type($x) `,` type($gamma) `->` type($result)
  }];
}

def PE_SpdGateGradOp : PE_ComputeOp<"spd_gate_grad"> {
  let summary = "gradient of pe.spd_gate";
  let description = [{
    With `exp(gamma)` broadcast over the leading dimensions of `x` as in the
    forward op:

    ```
    dx     = dy * exp(gamma)
    dgamma = sum over the leading dimensions of dy * x * exp(gamma)
             ([D]: over b and t; [T, D]: over b)
    ```

    Shapes: `x` and `dy` `[B, T, D]`, `gamma` `[D]` or `[T, D]`; results
    `dx` (the shape of `x`) and `dgamma` (the shape of `gamma`).

    ```mlir
    %dx, %dg = pe.spd_gate_grad %x, %gamma, %dy : tensor<?x64x32xf32>, tensor<32xf32>, tensor<?x64x32xf32> -> (tensor<?x64x32xf32>, tensor<32xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$gamma,
                       PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$dx, PE_FloatTensor:$dgamma);
  let assemblyFormat = [{
    $x `,` $gamma `,` $dy attr-dict `:` type($x) `,` type($gamma) `,`
    type($dy) `->` `(` type($dx) `,` type($dgamma) `)`
  }];
}

def PE_SinusoidalOp : PE_ComputeOp<"sinusoidal"> {
  let summary = "sinusoidal position table";
  let description = [{
    `PE[p, 2i] = sin(p / base^(2i/dim))`, `PE[p, 2i+1] = cos(p /
    base^(2i/dim))`. Result `[length, dim]`; `length > 0`, `dim > 0` even,
    `base > 0`.

    A constant for autodiff: it has no operands and gets no gradient.

    ```mlir
    %pe = pe.sinusoidal length(64) dim(128) base(1.000000e+04) : tensor<64x128xf32>
    ```
  }];
  let arguments = (ins I64Attr:$length, I64Attr:$dim, F64Attr:$base);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    `length` `(` $length `)` `dim` `(` $dim `)` `base` `(` $base `)` attr-dict
    `:` type($result)
  }];
}

#endif // STRINGC_DIALECT_PE_PEPOSITIONOPS_TD
