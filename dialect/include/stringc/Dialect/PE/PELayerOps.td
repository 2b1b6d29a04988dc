//===- PELayerOps.td - network layers ----------------------*- tablegen -*-===//
//
// The ordinary ops of a ViT and a small GPT, each followed by the backward
// ops pe-autodiff builds for it. This file: the dense layers, the norm,
// embeddings, attention and the loss; the activations, the elementwise
// arithmetic with the adjoints of broadcasting (sum_to, broadcast_to,
// expand_axis), scale, dropout and mean are the same family's
// PELayerElementwiseOps.td, included below. Included by PEOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PELAYEROPS_TD
#define STRINGC_DIALECT_PE_PELAYEROPS_TD

def PE_LinearOp : PE_ComputeOp<"linear", [PE_Differentiable]> {
  let summary = "affine map of the last dimension";
  let description = [{
    `y[..., o] = sum_i x[..., i] * w[i, o] + b[o]` (no `+ b` without `b`).

    Shapes: `x` `[..., I]` (rank >= 1, only dimension 0 dynamic), `w`
    `[I, O]` and `b` `[O]` static; the result is `[..., O]` with the leading
    dimensions of `x`. Note `w` is stored input-major (`x W`), the transpose of
    PyTorch's `nn.Linear.weight`.

    ```mlir
    %y = pe.linear %x, %w, %b : tensor<?x50x64xf32>, tensor<64x256xf32>, tensor<256xf32> -> tensor<?x50x256xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$w,
                       Optional<PE_FloatTensor>:$b);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $w (`,` $b^)? attr-dict `:` type($x) `,` type($w) (`,` type($b)^)?
    `->` type($result)
  }];
}

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

def PE_LayerNormOp : PE_ComputeOp<"layer_norm", [PE_Differentiable]> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    With `mu = mean_d x[..., d]` and `var = mean_d (x[..., d] - mu)^2` (the
    biased variance): `y[..., d] = (x[..., d] - mu) / sqrt(var + epsilon) *
    gamma[d] + beta[d]`.

    Shapes: `x` `[..., D]`, `gamma` and `beta` `[D]`; the result has the type
    of `x`. `epsilon > 0`, default `1e-5`.

    ```mlir
    %y = pe.layer_norm %x, %g, %b epsilon(1.000000e-06) : tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$gamma,
                       PE_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $gamma `,` $beta (`epsilon` `(` $epsilon^ `)`)? attr-dict `:`
    type($x) `,` type($gamma) `,` type($beta) `->` type($result)
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

include "stringc/Dialect/PE/PELayerElementwiseOps.td"

def PE_PatchEmbedOp : PE_ComputeOp<"patch_embed", [PE_Differentiable]> {
  let summary = "non-overlapping patches of an image, linearly embedded";
  let description = [{
    The image `[B, C, H, W]` is cut into `p x p` patches (`p` = `patch`, which
    divides `H` and `W`), taken in row-major order: patch `n` is at patch row
    `n / (W/p)`, patch column `n % (W/p)`. Each patch is flattened in
    `(c, py, px)` order, `v[(c*p + py)*p + px] = image[b, c, row*p + py,
    col*p + px]`, then `y[b, n, :] = v W + b`.

    Shapes: `image` `[B, C, H, W]`, `w` `[C*p*p, D]`, `b` `[D]`; result
    `[B, (H/p)*(W/p), D]`. The same as a stride-`p` `Conv2d` whose weight is
    `w` transposed and reshaped to `[D, C, p, p]`.

    ```mlir
    %e = pe.patch_embed %img, %w, %b patch(4) : tensor<?x1x28x28xf32>, tensor<16x64xf32>, tensor<64xf32> -> tensor<?x49x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$image, PE_FloatTensor:$w,
                       PE_FloatTensor:$b, I64Attr:$patch);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $image `,` $w `,` $b `patch` `(` $patch `)` attr-dict `:` type($image) `,`
    type($w) `,` type($b) `->` type($result)
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

def PE_TokenEmbedOp : PE_ComputeOp<"token_embed", [PE_Differentiable]> {
  let summary = "table lookup of token ids";
  let description = [{
    `y[b, t, :] = table[ids[b, t], :]`. Shapes: `ids` `[B, T]` (`i32`, each
    in `[0, V)`), `table` `[V, D]`; result `[B, T, D]`.

    ```mlir
    %e = pe.token_embed %ids, %table : tensor<?x64xi32>, tensor<256x128xf32> -> tensor<?x64x128xf32>
    ```
  }];
  let arguments = (ins PE_IntTensor:$ids, PE_FloatTensor:$table);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` type($ids) `,` type($table) `->`
    type($result)
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

def PE_ClassTokenOp : PE_ComputeOp<"class_token", [PE_Differentiable]> {
  let summary = "prepends a learned token to every sequence";
  let description = [{
    `y[b, 0, :] = cls`, `y[b, n + 1, :] = x[b, n, :]`. Shapes: `x`
    `[B, N, D]`, `cls` `[D]`; result `[B, N + 1, D]`.

    ```mlir
    %y = pe.class_token %x, %cls : tensor<?x49x64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, PE_FloatTensor:$cls);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $cls attr-dict `:` type($x) `,` type($cls) `->` type($result)
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

def PE_SelectTokenOp : PE_ComputeOp<"select_token", [PE_Differentiable]> {
  let summary = "one token of every sequence";
  let description = [{
    `y[b, :] = x[b, index, :]`, `0 <= index < T`. Shapes: `x` `[B, T, D]`;
    result `[B, D]`.

    ```mlir
    %c = pe.select_token %x index(0) : tensor<?x50x64xf32> -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, I64Attr:$index);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `index` `(` $index `)` attr-dict `:` type($x) `->` type($result)
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

def PE_AttentionOp : PE_ComputeOp<"attention", [PE_DifferentiableSaving]> {
  let summary = "multi-head scaled dot-product attention";
  let description = [{
    `q`, `k`, `v` are `[B, T, D]`; head `h` (of `heads`, which divides `D`)
    owns columns `h*Dh .. (h+1)*Dh - 1`, `Dh = D / heads`. Writing `q_i`,
    `k_j`, `v_j` for the head-`h` slices of tokens `i`, `j` (column vectors):

    ```
    s_ij = scale * q_i^T k_j            (no rel)
    s_ij = scale * q_i^T rel[i, j] k_j  (with rel, [T, T, Dh, Dh], all heads)
    y_i  = sum_j softmax_j(s_ij + mask_ij) v_j
    ```

    `mask_ij` is 0 where key `j` is visible to query `i` and `-inf`
    elsewhere:
    - `none`: every key is visible;
    - `causal`: keys `j <= i`;
    - `skip` (requires `skip_base(n)`, `n >= 0`; forbidden otherwise): head
      `h` sees only key `j = i - (n + h)`; a query with no such key (`j < 0`)
      outputs zeros.

    `scale > 0`, usually `1 / sqrt(Dh)`. With `rel` (e.g. from
    `pe.generator_exp` over `pe.relative_positions`), `rel[i, j] =
    R(r_j - r_i)` and `s_ij` is relative-position attention. The result has
    the type of `q`; the output projection is a separate `pe.linear`.

    The optional second result `lse` (f32 `[B, heads, T]`) is each query
    row's log-sum-exp, `lse[b, h, i] = log sum_j exp(s_ij + mask_ij)` (`-inf`
    for a row with no visible key), which `pe.attention_grad` reads to
    rebuild the softmax without a second pass over the keys. pe-autodiff adds
    it in @gradients (`withSavedResults`); @forward never computes it.

    ```mlir
    %o = pe.attention %q, %k, %v heads(4) scale(2.500000e-01) mask(causal) : tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32> -> tensor<?x64x128xf32>
    %o = pe.attention %q, %k, %v heads(1) scale(5.000000e-01) mask(skip) skip_base(1) : tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x8x4xf32> -> tensor<?x8x4xf32>
    %o = pe.attention %q, %k, %v, %rel heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32> -> tensor<?x50x64xf32>
    %o, %lse = pe.attention %q, %k, %v heads(4) scale(2.500000e-01) mask(causal) : tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32> -> tensor<?x64x128xf32>, tensor<?x4x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$q, PE_FloatTensor:$k,
                       PE_FloatTensor:$v, Optional<PE_FloatTensor>:$rel,
                       I64Attr:$heads, F64Attr:$scale, PE_MaskKindAttr:$mask,
                       OptionalAttr<I64Attr>:$skip_base);
  let results = (outs PE_FloatTensor:$result, PE_SavedTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`,` $rel^)? `heads` `(` $heads `)` `scale` `(` $scale `)`
    `mask` `(` custom<EnumKeyword>($mask) `)`
    (`skip_base` `(` $skip_base^ `)`)? attr-dict `:`
    type($q) `,` type($k) `,` type($v) (`,` type($rel)^)? `->` type($result)
    (`,` type($lse)^)?
  }];
}

def PE_AttentionGradOp : PE_ComputeOp<"attention_grad"> {
  let summary = "gradient of pe.attention";
  let description = [{
    Rebuilds the softmax from the forward's saved log-sum-exp (no stored
    score matrix), with the notation of `pe.attention` (`q_i`, `k_j`, `v_j`,
    `y_i`, `dy_i` the head-`h` slices of token `i` / `j`, column vectors;
    `R_ij = rel[i, j]` or the identity without `rel`):

    ```
    s_ij  = scale * q_i^T R_ij k_j
    P_ij  = exp(s_ij + mask_ij - lse_i)        (= softmax_j; a row with no visible key: P_i = 0)
    D_i   = dy_i^T y_i                         (= sum_l P_il dP_il)
    dv_j  = sum_i P_ij dy_i
    dP_ij = dy_i^T v_j
    dS_ij = P_ij (dP_ij - D_i)
    dq_i  = scale * sum_j dS_ij R_ij k_j
    dk_j  = scale * sum_i dS_ij R_ij^T q_i
    drel[i, j] = scale * sum_{b, h} dS_ij q_i k_j^T
    ```

    `mask`, `heads`, `scale`, `skip_base` are those of the forward op, with
    the same rules. Rows without a visible key give exact zeros (never NaN)
    to every gradient.

    Operands `q`, `k`, `v`, the forward's result `y` `[B, T, D]` and its
    `lse` `[B, heads, T]`, `dy` `[B, T, D]`, then the optional `rel`
    `[T, T, Dh, Dh]` (last, after `dy`). `y` and `lse` must be those of the
    forward op on the same operands: a kernel may use them (the CUDA ones do)
    or recompute them (the CPU ones do, where that is as cheap). Results
    `dq`, `dk`, `dv` (the type of `q`), and `drel` (the shape of `rel`)
    exactly when `rel` is present.

    ```mlir
    %dq, %dk, %dv = pe.attention_grad %q, %k, %v, %y, %lse, %dy heads(4) scale(2.500000e-01) mask(causal) : tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x4x64xf32>, tensor<?x64x128xf32> -> (tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>)
    %dq, %dk, %dv, %drel = pe.attention_grad %q, %k, %v, %y, %lse, %dy, %rel heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x4x50xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32> -> (tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32>)
    ```
  }];
  let arguments = (ins PE_FloatTensor:$q, PE_FloatTensor:$k,
                       PE_FloatTensor:$v, PE_FloatTensor:$y,
                       PE_FloatTensor:$lse, PE_FloatTensor:$dy,
                       Optional<PE_FloatTensor>:$rel,
                       I64Attr:$heads, F64Attr:$scale, PE_MaskKindAttr:$mask,
                       OptionalAttr<I64Attr>:$skip_base);
  let results = (outs PE_FloatTensor:$dq, PE_FloatTensor:$dk,
                      PE_FloatTensor:$dv, Optional<PE_FloatTensor>:$drel);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $y `,` $lse `,` $dy (`,` $rel^)? `heads` `(` $heads `)`
    `scale` `(` $scale `)` `mask` `(` custom<EnumKeyword>($mask) `)`
    (`skip_base` `(` $skip_base^ `)`)? attr-dict `:`
    type($q) `,` type($k) `,` type($v) `,` type($y) `,` type($lse) `,`
    type($dy) (`,` type($rel)^)? `->`
    `(` type($dq) `,` type($dk) `,` type($dv) (`,` type($drel)^)? `)`
  }];
}

def PE_CrossEntropyOp : PE_ComputeOp<"cross_entropy", [PE_Differentiable]> {
  let summary = "mean softmax cross-entropy";
  let description = [{
    Over every position `n` of `labels` (`N` of them):
    `loss = (1/N) sum_n (logsumexp_c logits[n, c] - logits[n, labels[n]])`.

    With label smoothing `e = smoothing` (in `[0, 1)`) the target is
    `(1 - e) onehot(labels[n]) + e / C` (PyTorch's `label_smoothing`):
    `loss = (1/N) sum_n (logsumexp_c logits[n, c]
                         - (1 - e) logits[n, labels[n]] - (e / C) sum_c logits[n, c])`.

    Shapes: `logits` `[..., C]`, `labels` `[...]` (`i32`, each in
    `[0, C)`), the shape of `logits` without its last dimension; result
    `tensor<f32>`.

    ```mlir
    %l = pe.cross_entropy %logits, %labels : tensor<?x10xf32>, tensor<?xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$logits, PE_IntTensor:$labels,
                       DefaultValuedAttr<F64Attr, "0.0">:$smoothing);
  let results = (outs PE_ScalarTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->`
    type($result)
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

#endif // STRINGC_DIALECT_PE_PELAYEROPS_TD
