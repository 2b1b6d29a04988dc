//===- PELayerOps.td - network layers ----------------------*- tablegen -*-===//
//
// The ordinary ops of a ViT and a small GPT: dense layers, norms,
// activations, elementwise arithmetic, embeddings, attention and the loss.
// Included by PEOps.td.
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

def PE_GeluOp : PE_ComputeOp<"gelu", [PE_Differentiable]> {
  let summary = "Gaussian error linear unit, elementwise";
  let description = [{
    `y = x * (1 + erf(x / sqrt(2))) / 2`; with `approximate(true)` the tanh
    form `y = x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2`
    (PyTorch's `approximate="tanh"`). The result has the type of `x`.

    ```mlir
    %y = pe.gelu %x : tensor<?x50x256xf32> -> tensor<?x50x256xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x,
                       DefaultValuedAttr<BoolAttr, "false">:$approximate);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x (`approximate` `(` $approximate^ `)`)? attr-dict `:` type($x) `->`
    type($result)
  }];
}

def PE_ReluOp : PE_ComputeOp<"relu", [PE_Differentiable]> {
  let summary = "rectified linear unit, elementwise";
  let description = [{
    `y = max(x, 0)`. The result has the type of `x`.

    ```mlir
    %y = pe.relu %x : tensor<?x256xf32> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

// Elementwise binary ops with trailing-suffix broadcasting.
class PE_BinaryOp<string mnemonic, string expr>
    : PE_ComputeOp<mnemonic, [PE_Differentiable]> {
  let summary = "elementwise `" # expr # "` with trailing-suffix broadcast";
  let description = [{
    `y = }] # expr # [{`, elementwise. Either the two shapes are equal, or the
    shape of the lower-rank operand equals the trailing dimensions of the
    other's (`[D]` against `[B, T, D]`, `[T, D]` against `[B, T, D]`), and
    is repeated along the leading ones. The result has the shape of the
    higher-rank operand.

    ```mlir
    %y = pe.}] # mnemonic # [{ %a, %b : tensor<?x50x64xf32>, tensor<50x64xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$lhs, PE_FloatTensor:$rhs);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def PE_AddOp : PE_BinaryOp<"add", "lhs + rhs">;
def PE_SubOp : PE_BinaryOp<"sub", "lhs - rhs">;
def PE_MulOp : PE_BinaryOp<"mul", "lhs * rhs">;

def PE_ScaleOp : PE_ComputeOp<"scale", [PE_Differentiable]> {
  let summary = "affine map by constants, elementwise";
  let description = [{
    `y = factor * x + bias` (`bias` defaults to 0). The result has the type
    of `x`. `tensor / c` in the language is `factor(1/c)`.

    ```mlir
    %y = pe.scale %x factor(5.000000e-01) bias(1.000000e+00) : tensor<?x64xf32> -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, F64Attr:$factor,
                       DefaultValuedAttr<F64Attr, "0.0">:$bias);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `factor` `(` $factor `)` (`bias` `(` $bias^ `)`)? attr-dict `:`
    type($x) `->` type($result)
  }];
}

def PE_MeanOp : PE_ComputeOp<"mean", [PE_Differentiable]> {
  let summary = "arithmetic mean over one axis or over everything";
  let description = [{
    With `axis(a)`: `y` is `x` averaged over dimension `a` (`0 <= a < rank`),
    which is removed from the shape. Without: the mean of all elements, a
    `tensor<f32>`.

    ```mlir
    %m = pe.mean %x axis(1) : tensor<?x50x64xf32> -> tensor<?x64xf32>
    %s = pe.mean %l : tensor<?x50xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, OptionalAttr<I64Attr>:$axis);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x (`axis` `(` $axis^ `)`)? attr-dict `:` type($x) `->` type($result)
  }];
}

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

def PE_AttentionOp : PE_ComputeOp<"attention", [PE_Differentiable]> {
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

    ```mlir
    %o = pe.attention %q, %k, %v heads(4) scale(2.500000e-01) mask(causal) : tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32> -> tensor<?x64x128xf32>
    %o = pe.attention %q, %k, %v heads(1) scale(5.000000e-01) mask(skip) skip_base(1) : tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x8x4xf32> -> tensor<?x8x4xf32>
    %o = pe.attention %q, %k, %v, %rel heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$q, PE_FloatTensor:$k,
                       PE_FloatTensor:$v, Optional<PE_FloatTensor>:$rel,
                       I64Attr:$heads, F64Attr:$scale, PE_MaskKindAttr:$mask,
                       OptionalAttr<I64Attr>:$skip_base);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`,` $rel^)? `heads` `(` $heads `)` `scale` `(` $scale `)`
    `mask` `(` custom<EnumKeyword>($mask) `)`
    (`skip_base` `(` $skip_base^ `)`)? attr-dict `:`
    type($q) `,` type($k) `,` type($v) (`,` type($rel)^)? `->` type($result)
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

#endif // STRINGC_DIALECT_PE_PELAYEROPS_TD
