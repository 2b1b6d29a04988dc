//===- PEGradOps.td - backward ops -------------------------*- tablegen -*-===//
//
// The ops that pe-autodiff builds where a vector-Jacobian product needs a
// kernel of its own (docs/autodiff.md, "Backward ops"). Each takes the
// operands of its forward op that the product reads, then `dy`, the gradient
// of the forward result; `attention_grad` takes the optional `rel` after
// `dy`. Each result `d<name>` is the gradient of the forward operand `<name>`
// and has its shape. Reductions over "the leading dimensions" include the
// batch. Included by PEOps.td.
//
// Assembly as for the forward ops; ops with several results write
// `-> (type, type)`.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PEGRADOPS_TD
#define STRINGC_DIALECT_PE_PEGRADOPS_TD

//===----------------------------------------------------------------------===//
// Broadcasting and reductions
//===----------------------------------------------------------------------===//

def PE_SumToOp : PE_ComputeOp<"sum_to"> {
  let summary = "sums the leading dimensions away (the adjoint of broadcast)";
  let description = [{
    The result shape `S` is a trailing suffix of the shape of `x`
    (`x` `[L..., S...]`, possibly `S = []` or `L = []`), and
    `y[s] = sum_l x[l, s]` over all the leading indices `l`. This is the
    gradient of a `pe.add` / `pe.sub` / `pe.mul` operand that was broadcast,
    and of `pe.linear`'s bias. With `L = []` it is the identity.

    ```mlir
    %g = pe.sum_to %dy : tensor<?x50x64xf32> -> tensor<50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def PE_BroadcastToOp : PE_ComputeOp<"broadcast_to"> {
  let summary = "repeats a tensor over new leading dimensions";
  let description = [{
    The result type is the target: the shape of `x` is a trailing suffix of
    the result shape `[L..., S...]` (a scalar `x`, `[]`, broadcasts to any
    shape), and `y[l, s] = x[s]` for every leading index `l`. This is the
    adjoint of `pe.sum_to`. (The gradient of `pe.mean` is `pe.mean_grad`,
    which also divides by the count.)

    The result may be dynamic only in dimension 0. When that dimension is a
    new one (not a dimension of `x`), its size is only known at run time:
    the op then takes a second operand `like`, any `f32` tensor of the result
    shape (usually the forward operand whose gradient this is), of which
    only the size of dimension 0 is read. `like` is allowed, and ignored
    besides its type, in the other cases too.

    ```mlir
    %y = pe.broadcast_to %x : tensor<64xf32> -> tensor<50x64xf32>
    %y = pe.broadcast_to %dy, %x : tensor<f32>, tensor<?x50xf32> -> tensor<?x50xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, Optional<PE_FloatTensor>:$like);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x (`,` $like^)? attr-dict `:` type($x) (`,` type($like)^)? `->`
    type($result)
  }];
}

def PE_ExpandAxisOp : PE_ComputeOp<"expand_axis"> {
  let summary = "repeats a tensor along a new dimension";
  let description = [{
    Inserts a dimension of `size` at `axis` (`0 <= axis <= rank(x)`,
    `size > 0`) and repeats `x` along it:
    `y[i_0, ..., i_{axis-1}, n, i_axis, ...] = x[i_0, ..., i_{axis-1},
    i_axis, ...]` for `n` in `[0, size)`: the adjoint of a sum over `axis`
    (the gradient of `pe.mean` is `pe.mean_grad`, which also divides by the
    count, known at run time). The dynamic batch stays
    in dimension 0, so `axis = 0` needs a static `x` (a new dynamic batch is
    `pe.broadcast_to` with `like`).

    ```mlir
    %y = pe.expand_axis %dy axis(1) size(50) : tensor<?x64xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, I64Attr:$axis, I64Attr:$size);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `axis` `(` $axis `)` `size` `(` $size `)` attr-dict `:` type($x) `->`
    type($result)
  }];
}

def PE_MeanGradOp : PE_ComputeOp<"mean_grad"> {
  let summary = "gradient of pe.mean";
  let description = [{
    With `axis(a)`: `dy` has the shape of `x` without dimension `a`, and
    `dx[i_0, ..., i_{a-1}, n, i_{a+1}, ...] = dy[i_0, ..., i_{a-1}, i_{a+1},
    ...] / N` for every `n`, with `N = size(x, a)`. Without `axis`: `dy` is a
    `tensor<f32>` and every `dx[i] = dy / N`, with `N` the number of elements
    of `x`. So `dx` is `dy` repeated over the averaged elements and divided by
    their count.

    `N` is read from the shape of `x` at run time, so the count may include
    the dynamic batch dimension (`axis(0)`, or no `axis` with a `[B, ...]`
    `x`): `x` is the forward operand, of which only the shape is read.

    Shapes: `x` any rank (only dimension 0 dynamic), `0 <= axis < rank(x)`;
    `dy` the shape of the forward result (`x`'s without `axis`, or `[]`);
    result `dx` with the shape of `x`.

    ```mlir
    %dx = pe.mean_grad %x, %dy axis(1) : tensor<?x50x64xf32>, tensor<?x64xf32> -> tensor<?x50x64xf32>
    %dx = pe.mean_grad %x, %dy : tensor<?x10xf32>, tensor<f32> -> tensor<?x10xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$dy,
                       OptionalAttr<I64Attr>:$axis);
  let results = (outs PE_FloatTensor:$dx);
  let assemblyFormat = [{
    $x `,` $dy (`axis` `(` $axis^ `)`)? attr-dict `:` type($x) `,` type($dy)
    `->` type($dx)
  }];
}

//===----------------------------------------------------------------------===//
// Network layers
//===----------------------------------------------------------------------===//

def PE_LinearGradInputOp : PE_ComputeOp<"linear_grad_input"> {
  let summary = "gradient of pe.linear with respect to its input";
  let description = [{
    `dx[..., i] = sum_o dy[..., o] * w[i, o]`, i.e. `dx = dy W^T`.

    Shapes: `dy` `[..., O]` (rank >= 1, only dimension 0 dynamic), `w`
    `[I, O]` (static); result `dx` `[..., I]` with the leading dimensions of
    `dy`.

    ```mlir
    %dx = pe.linear_grad_input %dy, %w : tensor<?x50x256xf32>, tensor<64x256xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$dy, PE_FloatTensor:$w);
  let results = (outs PE_FloatTensor:$dx);
  let assemblyFormat = [{
    $dy `,` $w attr-dict `:` type($dy) `,` type($w) `->` type($dx)
  }];
}

def PE_LinearGradWeightOp : PE_ComputeOp<"linear_grad_weight"> {
  let summary = "gradient of pe.linear with respect to its weight";
  let description = [{
    `dw[i, o] = sum_l x[l, i] * dy[l, o]` over every leading index `l` (all
    dimensions but the last, batch included), i.e. `X^T dY` with `X`, `dY`
    flattened to `[N, I]` and `[N, O]`. For rank-1 `x` it is the outer
    product `x dy^T`.

    Shapes: `x` `[..., I]`, `dy` `[..., O]` with the leading dimensions of
    `x` (`I`, `O` static); result `dw` `[I, O]`.

    ```mlir
    %dw = pe.linear_grad_weight %x, %dy : tensor<?x50x64xf32>, tensor<?x50x256xf32> -> tensor<64x256xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$dw);
  let assemblyFormat = [{
    $x `,` $dy attr-dict `:` type($x) `,` type($dy) `->` type($dw)
  }];
}

def PE_LayerNormGradOp : PE_ComputeOp<"layer_norm_grad"> {
  let summary = "gradient of pe.layer_norm";
  let description = [{
    Recomputes the statistics of each row of `x` (over the last dimension,
    `D` entries): `mu = mean_d x`, `var = mean_d (x - mu)^2` (biased),
    `rstd = 1 / sqrt(var + epsilon)`, `xhat = (x - mu) * rstd`. Then, with
    `g = dy * gamma` and means over the last dimension:

    ```
    dx     = rstd * (g - mean_d(g) - xhat * mean_d(g * xhat))
    dgamma = sum over the leading dimensions of dy * xhat
    dbeta  = sum over the leading dimensions of dy
    ```

    `beta` does not enter the gradient and is not an operand. Shapes: `x`
    and `dy` `[..., D]`, `gamma` `[D]`; results `dx` (the shape of `x`),
    `dgamma` and `dbeta` `[D]`. `epsilon > 0`, default `1e-5`, as in the
    forward op.

    ```mlir
    %dx, %dg, %db = pe.layer_norm_grad %x, %g, %dy : tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$gamma,
                       PE_FloatTensor:$dy,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs PE_FloatTensor:$dx, PE_FloatTensor:$dgamma,
                      PE_FloatTensor:$dbeta);
  let assemblyFormat = [{
    $x `,` $gamma `,` $dy (`epsilon` `(` $epsilon^ `)`)? attr-dict `:`
    type($x) `,` type($gamma) `,` type($dy) `->` `(` type($dx) `,`
    type($dgamma) `,` type($dbeta) `)`
  }];
}

def PE_GeluGradOp : PE_ComputeOp<"gelu_grad"> {
  let summary = "gradient of pe.gelu, elementwise";
  let description = [{
    `dx = dy * gelu'(x)`. Erf form (the default), with
    `Phi(x) = (1 + erf(x / sqrt(2))) / 2`:
    `gelu'(x) = Phi(x) + x * exp(-x^2 / 2) / sqrt(2 pi)`.
    With `approximate(true)`, `u = sqrt(2 / pi) * (x + 0.044715 x^3)`:
    `gelu'(x) = (1 + tanh u) / 2 + x / 2 * (1 - tanh^2 u) * sqrt(2 / pi) *
    (1 + 3 * 0.044715 x^2)`.

    Shapes: `x` and `dy` the same; `dx` has that shape.

    ```mlir
    %dx = pe.gelu_grad %x, %dy approximate(true) : tensor<?x50x256xf32>, tensor<?x50x256xf32> -> tensor<?x50x256xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$dy,
                       DefaultValuedAttr<BoolAttr, "false">:$approximate);
  let results = (outs PE_FloatTensor:$dx);
  let assemblyFormat = [{
    $x `,` $dy (`approximate` `(` $approximate^ `)`)? attr-dict `:` type($x)
    `,` type($dy) `->` type($dx)
  }];
}

def PE_ReluGradOp : PE_ComputeOp<"relu_grad"> {
  let summary = "gradient of pe.relu, elementwise";
  let description = [{
    `dx = dy` where `x > 0`, `0` elsewhere (`x = 0` included, as in
    PyTorch). Shapes: `x` and `dy` the same; `dx` has that shape.

    ```mlir
    %dx = pe.relu_grad %x, %dy : tensor<?x256xf32>, tensor<?x256xf32> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$dx);
  let assemblyFormat = [{
    $x `,` $dy attr-dict `:` type($x) `,` type($dy) `->` type($dx)
  }];
}

def PE_PatchEmbedGradOp : PE_ComputeOp<"patch_embed_grad"> {
  let summary = "gradient of pe.patch_embed with respect to its weights";
  let description = [{
    With `v(b, n)` the flattened patch `n` of image `b`, exactly as in
    `pe.patch_embed` (`v[(c*p + py)*p + px] = image[b, c, row*p + py,
    col*p + px]`, row-major patch order):

    ```
    dw[k, d] = sum_{b, n} v(b, n)[k] * dy[b, n, d]
    db[d]    = sum_{b, n} dy[b, n, d]
    ```

    The image (a model input) gets no gradient. Shapes: `image`
    `[B, C, H, W]`, `dy` `[B, (H/p)*(W/p), D]`; results `dw` `[C*p*p, D]`
    and `db` `[D]`. `patch` (`p > 0`) divides `H` and `W`.

    ```mlir
    %dw, %db = pe.patch_embed_grad %img, %dy patch(4) : tensor<?x1x28x28xf32>, tensor<?x49x64xf32> -> (tensor<16x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$image, PE_FloatTensor:$dy,
                       I64Attr:$patch);
  let results = (outs PE_FloatTensor:$dw, PE_FloatTensor:$db);
  let assemblyFormat = [{
    $image `,` $dy `patch` `(` $patch `)` attr-dict `:` type($image) `,`
    type($dy) `->` `(` type($dw) `,` type($db) `)`
  }];
}

def PE_TokenEmbedGradOp : PE_ComputeOp<"token_embed_grad"> {
  let summary = "gradient of pe.token_embed with respect to its table";
  let description = [{
    Scatter-add of the rows of `dy` at the ids:
    `dtable[v, :] = sum over (b, t) with ids[b, t] = v of dy[b, t, :]`
    (zero for ids that do not occur). Each id is in `[0, V)`, as for the
    forward op.

    Shapes: `ids` `[B, T]` (`i32`), `dy` `[B, T, D]`; result `dtable`
    `[V, D]`, static. The vocabulary size `V` is dimension 0 of the result
    type (the forward table's).

    ```mlir
    %dt = pe.token_embed_grad %ids, %dy : tensor<?x64xi32>, tensor<?x64x128xf32> -> tensor<256x128xf32>
    ```
  }];
  let arguments = (ins PE_IntTensor:$ids, PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$dtable);
  let assemblyFormat = [{
    $ids `,` $dy attr-dict `:` type($ids) `,` type($dy) `->` type($dtable)
  }];
}

def PE_ClassTokenGradOp : PE_ComputeOp<"class_token_grad"> {
  let summary = "gradient of pe.class_token";
  let description = [{
    `dx[b, n, :] = dy[b, n + 1, :]`, `dcls[:] = sum_b dy[b, 0, :]`.

    Shapes: `dy` `[B, N + 1, D]`; results `dx` `[B, N, D]` and `dcls` `[D]`.

    ```mlir
    %dx, %dcls = pe.class_token_grad %dy : tensor<?x50x64xf32> -> (tensor<?x49x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$dy);
  let results = (outs PE_FloatTensor:$dx, PE_FloatTensor:$dcls);
  let assemblyFormat = [{
    $dy attr-dict `:` type($dy) `->` `(` type($dx) `,` type($dcls) `)`
  }];
}

def PE_SelectTokenGradOp : PE_ComputeOp<"select_token_grad"> {
  let summary = "gradient of pe.select_token";
  let description = [{
    `dx[b, index, :] = dy[b, :]`, `dx[b, t, :] = 0` for `t != index`.

    Shapes: `dy` `[B, D]`; result `dx` `[B, T, D]`. The token count `T`
    (static) is dimension 1 of the result type; `0 <= index < T`.

    ```mlir
    %dx = pe.select_token_grad %dy index(0) : tensor<?x64xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$dy, I64Attr:$index);
  let results = (outs PE_FloatTensor:$dx);
  let assemblyFormat = [{
    $dy `index` `(` $index `)` attr-dict `:` type($dy) `->` type($dx)
  }];
}

def PE_AttentionGradOp : PE_ComputeOp<"attention_grad"> {
  let summary = "gradient of pe.attention";
  let description = [{
    Recomputes the forward pass per batch element and head (no stored score
    matrix), with the notation of `pe.attention` (`q_i`, `k_j`, `v_j`,
    `dy_i` the head-`h` slices of token `i` / `j`, column vectors; `R_ij =
    rel[i, j]` or the identity without `rel`):

    ```
    s_ij  = scale * q_i^T R_ij k_j
    P_ij  = softmax_j(s_ij + mask_ij)          (a row with no visible key: P_i = 0)
    dv_j  = sum_i P_ij dy_i
    dP_ij = dy_i^T v_j
    dS_ij = P_ij (dP_ij - sum_l P_il dP_il)
    dq_i  = scale * sum_j dS_ij R_ij k_j
    dk_j  = scale * sum_i dS_ij R_ij^T q_i
    drel[i, j] = scale * sum_{b, h} dS_ij q_i k_j^T
    ```

    `mask`, `heads`, `scale`, `skip_base` are those of the forward op, with
    the same rules. Rows without a visible key give exact zeros (never NaN)
    to every gradient.

    Operands `q`, `k`, `v`, `dy` `[B, T, D]`, then the optional `rel`
    `[T, T, Dh, Dh]` (after `dy`, unlike the forward op where it is last).
    Results `dq`, `dk`, `dv` (the type of `q`), and `drel` (the shape of
    `rel`) exactly when `rel` is present.

    ```mlir
    %dq, %dk, %dv = pe.attention_grad %q, %k, %v, %dy heads(4) scale(2.500000e-01) mask(causal) : tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32> -> (tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>)
    %dq, %dk, %dv, %drel = pe.attention_grad %q, %k, %v, %dy, %rel heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32> -> (tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$q, PE_FloatTensor:$k,
                       PE_FloatTensor:$v, PE_FloatTensor:$dy,
                       Optional<PE_FloatTensor>:$rel,
                       I64Attr:$heads, F64Attr:$scale, PE_MaskKindAttr:$mask,
                       OptionalAttr<I64Attr>:$skip_base);
  let results = (outs PE_FloatTensor:$dq, PE_FloatTensor:$dk,
                      PE_FloatTensor:$dv, Optional<PE_FloatTensor>:$drel);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $dy (`,` $rel^)? `heads` `(` $heads `)`
    `scale` `(` $scale `)` `mask` `(` custom<EnumKeyword>($mask) `)`
    (`skip_base` `(` $skip_base^ `)`)? attr-dict `:`
    type($q) `,` type($k) `,` type($v) `,` type($dy) (`,` type($rel)^)? `->`
    `(` type($dq) `,` type($dk) `,` type($dv) (`,` type($drel)^)? `)`
  }];
}

def PE_CrossEntropyGradOp : PE_ComputeOp<"cross_entropy_grad"> {
  let summary = "gradient of pe.cross_entropy with respect to the logits";
  let description = [{
    Over the `N` positions `n` of `labels` (`N` counts the batch, known at
    run time):
    `dlogits[n, c] = dy * (softmax(logits[n])[c] - target[n, c]) / N`,
    `target[n, c] = (1 - e) (c == labels[n]) + e / C`, `e = smoothing`.

    Shapes: `logits` `[..., C]`, `labels` `[...]` (`i32`, each in `[0, C)`),
    `dy` `tensor<f32>`; result `dlogits` with the shape of `logits`.

    ```mlir
    %dl = pe.cross_entropy_grad %logits, %labels, %dy : tensor<?x10xf32>, tensor<?xi32>, tensor<f32> -> tensor<?x10xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$logits, PE_IntTensor:$labels,
                       PE_ScalarTensor:$dy,
                       DefaultValuedAttr<F64Attr, "0.0">:$smoothing);
  let results = (outs PE_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $labels `,` $dy attr-dict `:` type($logits) `,` type($labels)
    `,` type($dy) `->` type($dlogits)
  }];
}

//===----------------------------------------------------------------------===//
// Positional encodings
//===----------------------------------------------------------------------===//

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

#endif // STRINGC_DIALECT_PE_PEGRADOPS_TD
