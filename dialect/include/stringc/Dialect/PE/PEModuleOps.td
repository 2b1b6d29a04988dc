//===- PEModuleOps.td - module-level declarations ----------*- tablegen -*-===//
//
// Ops that declare what a model is made of besides its forward graph: its
// parameters, its optimizer and its training data. Included by PEOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PEMODULEOPS_TD
#define STRINGC_DIALECT_PE_PEMODULEOPS_TD

def PE_ParameterOp : PE_Op<"parameter", [
    Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a learned (or frozen) parameter tensor and its initializer";
  let description = [{
    Declares the parameter `@sym_name` of type `type`, a statically shaped
    `f32` tensor, and how it is initialised. `pe.get_param` reads it. The
    optimizer updates it unless it is `frozen`.

    `init` selects the initializer; each takes exactly the companion
    attributes listed, all required, and no others:

    | init       | companions           | value of element `e`                        |
    |------------|----------------------|---------------------------------------------|
    | `normal`   | `mean`, `std`, `seed`| `mean + std * N(0, 1)`, `std > 0`           |
    | `uniform`  | `low`, `high`, `seed`| uniform in `[low, high)`, `low < high`      |
    | `zeros`    |                      | `0`                                         |
    | `ones`     |                      | `1`                                         |
    | `constant` | `value`              | `value`                                     |
    | `load`     | `file`, `tensor`     | tensor `tensor` of the safetensors `file`   |

    `seed` is 64 bits, read as unsigned; the same seed gives the same values.
    `file` is the path the frontend resolved (relative to the `.pe` file).

    Example:

    ```mlir
    pe.parameter @cls : tensor<64xf32> {init = "normal", mean = 0.0 : f64, std = 2.000000e-02 : f64, seed = 1 : i64}
    pe.parameter @wq : tensor<64x64xf32> frozen {file = "w.safetensors", init = "load", tensor = "wq"}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttr:$type,
    StrAttr:$init,
    OptionalAttr<F64Attr>:$mean,
    OptionalAttr<F64Attr>:$std,
    OptionalAttr<F64Attr>:$low,
    OptionalAttr<F64Attr>:$high,
    OptionalAttr<F64Attr>:$value,
    OptionalAttr<I64Attr>:$seed,
    OptionalAttr<StrAttr>:$file,
    OptionalAttr<StrAttr>:$tensor,
    UnitAttr:$frozen
  );
  let assemblyFormat = "$sym_name `:` $type (`frozen` $frozen^)? attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The parameter's tensor type.
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def PE_GetParamOp : PE_Op<"get_param", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a parameter";
  let description = [{
    The current value of the parameter `@param`, which must be a
    `pe.parameter` of the nearest enclosing symbol table, of exactly the
    result type.

    ```mlir
    %w = pe.get_param @w_patch : tensor<16x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

def PE_OptimizerOp : PE_Op<"optimizer", [HasParent<"::mlir::ModuleOp">]> {
  let summary = "the optimizer and learning-rate schedule of the training step";
  let description = [{
    `kind` is `adamw` or `sgd`. With gradient `g` of parameter `w` at step
    `t` (counting from 1) and learning rate `lr_t` from the schedule:

    - global clipping (when `clip_norm > 0`): every gradient is multiplied by
      `min(1, clip_norm / ||g_all||_2)`, the norm over all parameters;
    - `adamw`: `m = beta1 m + (1 - beta1) g`, `v = beta2 v + (1 - beta2) g^2`,
      `w -= lr_t * (m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) +
      weight_decay * w)` (decoupled weight decay);
    - `sgd`: `u = momentum u + g + weight_decay w`, `w -= lr_t * u`;
    - `ema_decay = d > 0`: an exponential moving average of the weights is
      kept beside them, `e = w` after step 1, `e = d e + (1 - d) w` after
      each later step (PyTorch's `AveragedModel` with
      `get_ema_multi_avg_fn(d)`), evaluated and checkpointed with them.

    `schedule` is `constant` (`lr_t = lr`) or `warmup_cosine`: `lr_t = lr *
    t / warmup_steps` for `t <= warmup_steps`, then, over the `N` steps of
    the run, `lr_t = min_lr + (lr - min_lr) * (1 + cos(pi * (t -
    warmup_steps) / (N - warmup_steps))) / 2`.

    Constraints: `lr > 0`, `beta1` and `beta2` in `[0, 1)`, `eps > 0`,
    `weight_decay >= 0`, `momentum` in `[0, 1)`, `clip_norm >= 0`,
    `warmup_steps >= 0`, `0 <= min_lr <= lr`, `ema_decay` in `[0, 1)`.
    A module has at most one `pe.optimizer`; attributes equal to their
    defaults are not printed.

    ```mlir
    pe.optimizer {kind = "adamw", lr = 3.000000e-04 : f64, schedule = "warmup_cosine", warmup_steps = 100 : i64}
    ```
  }];
  // The one definition of the optimizer's defaults: scripts/gen_op_schema.py
  // writes them into the runtime (stringrt/OdsDefaults.h), whose
  // stringrt::kOptimizerDefaults the frontend and the trainer use;
  // PackageBuilder.WritesDefaultValuedAttributes checks that packages carry
  // them all.
  let arguments = (ins
    StrAttr:$kind,
    DefaultValuedAttr<F64Attr, "1e-3">:$lr,
    DefaultValuedAttr<F64Attr, "0.9">:$beta1,
    DefaultValuedAttr<F64Attr, "0.999">:$beta2,
    DefaultValuedAttr<F64Attr, "1e-8">:$eps,
    DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
    DefaultValuedAttr<F64Attr, "0.0">:$momentum,
    DefaultValuedAttr<F64Attr, "0.0">:$clip_norm,
    DefaultValuedStrAttr<StrAttr, "constant">:$schedule,
    DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
    DefaultValuedAttr<F64Attr, "0.0">:$min_lr,
    DefaultValuedAttr<F64Attr, "0.0">:$ema_decay
  );
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

// The bounds of pe.dataset's attributes that the runtime enforces too:
// scripts/gen_op_schema.py writes them into stringrt/OdsDefaults.h.
def PE_DatasetLimits {
  int maxCropPadding = 64;
}

def PE_DatasetOp : PE_Op<"dataset", [HasParent<"::mlir::ModuleOp">]> {
  let summary = "the data the model trains on";
  let description = [{
    `kind = "idx"`: `path` is a directory of MNIST-layout IDX files (images
    and labels, optionally gzipped). `kind = "text"`: `path` is a byte-level
    text corpus, cut into windows of `context_length` bytes (required, > 0,
    and only allowed for `text`); the targets are the inputs shifted by one.
    A module has at most one `pe.dataset`.

    Augmentation of the training images (`idx` only; each absent or 0 is
    off; the evaluation never augments): `crop_padding` in [1, 64], a random
    crop of the image padded with that many zeros on every side;
    `flip` in (0, 1], the probability of a horizontal flip; `erase` in
    (0, 1], the probability of random erasing (docs/data.md).

    ```mlir
    pe.dataset {kind = "text", path = "corpus.txt", context_length = 64 : i64}
    pe.dataset {kind = "idx", path = "/data/fmnist", crop_padding = 4 : i64, flip = 5.000000e-01 : f64}
    ```
  }];
  let arguments = (ins
    StrAttr:$kind,
    StrAttr:$path,
    OptionalAttr<I64Attr>:$context_length,
    OptionalAttr<I64Attr>:$crop_padding,
    OptionalAttr<F64Attr>:$flip,
    OptionalAttr<F64Attr>:$erase
  );
  let extraClassDeclaration = "static constexpr int64_t kMaxCropPadding = " #
                              !cast<string>(PE_DatasetLimits.maxCropPadding) # ";";
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

#endif // STRINGC_DIALECT_PE_PEMODULEOPS_TD
