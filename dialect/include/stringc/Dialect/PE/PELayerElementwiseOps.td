//===- PELayerElementwiseOps.td - activations, arithmetic --*- tablegen -*-===//
//
// The layer family's ops without weights: the activations, the elementwise
// arithmetic with trailing-suffix broadcasting and the adjoints of
// broadcasting (sum_to, broadcast_to, expand_axis), scale, dropout and the
// mean, each followed by its backward ops. Included by PELayerOps.td, the
// family's file (docs/architecture.md, "The op library"); their C++ is the
// family's PELayerOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PELAYERELEMENTWISEOPS_TD
#define STRINGC_DIALECT_PE_PELAYERELEMENTWISEOPS_TD

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

def PE_DropoutOp : PE_ComputeOp<"dropout", [PE_Differentiable]> {
  let summary = "dropout or drop-path: a random mask, rescaled, elementwise";
  let description = [{
    `y = x * keep / (1 - p)` in the training program (`@gradients`), where
    `keep` is 0 with probability `p` and 1 otherwise: one draw per element
    (dropout), or with `per_sample(true)` one draw per sample shared by all
    its elements (drop-path, stochastic depth). `x` has the batch dimension
    first. The draws come from Philox4x32-10 keyed by the run's seed, the
    training step, the sample's index in the step's whole batch and
    `stream` (each dropout of a model has its own; docs/language.md,
    "Dropout"), so a mask is never stored: the backward regenerates it, and
    the VJP is this op again on `dy`. `@forward`, the evaluation program,
    holds no dropout (pe-autodiff replaces it by its input). `p` is in
    `[0, 1)`; the result has the type of `x`.

    ```mlir
    %y = pe.dropout %x p(1.000000e-01) stream(0) : tensor<?x50x64xf32> -> tensor<?x50x64xf32>
    %z = pe.dropout %x p(1.000000e-01) stream(1) per_sample(true) : tensor<?x50x64xf32> -> tensor<?x50x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$x, F64Attr:$p, I64Attr:$stream,
                       DefaultValuedAttr<BoolAttr, "false">:$per_sample);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $x `p` `(` $p `)` `stream` `(` $stream `)`
    (`per_sample` `(` $per_sample^ `)`)? attr-dict `:` type($x) `->`
    type($result)
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

#endif // STRINGC_DIALECT_PE_PELAYERELEMENTWISEOPS_TD
