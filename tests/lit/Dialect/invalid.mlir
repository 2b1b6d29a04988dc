// One case per verifier rule of the pe dialect: the func argument/result
// attributes, the module-level declarations, then every compute op.
// RUN: string-opt %s -split-input-file -verify-diagnostics

// Function arguments carry only pe.input.
// expected-error @+1 {{'func.func' op has unknown argument attribute 'pe.name' on argument #0 (expected 'pe.input')}}
func.func @f(%x: tensor<?x4xf32> {pe.name = "x"}) {
  return
}

// -----

// pe.input is a non-empty string.
// expected-error @+1 {{'func.func' op 'pe.input' on argument #1 must be a non-empty string, got 3 : i64}}
func.func @f(%x: tensor<?x4xf32> {pe.input = "x"}, %y: tensor<?xi32> {pe.input = 3}) {
  return
}

// -----

// Function results carry only pe.output (or pe.grad).
// expected-error @+1 {{'func.func' op has unknown result attribute 'pe.input' on result #0 (expected 'pe.output' or 'pe.grad')}}
func.func @f(%x: tensor<f32>) -> (tensor<f32> {pe.input = "loss"}) {
  return %x : tensor<f32>
}

// -----

// pe.output is a non-empty string.
// expected-error @+1 {{'func.func' op 'pe.output' on result #0 must be a non-empty string, got ""}}
func.func @f(%x: tensor<f32>) -> (tensor<f32> {pe.output = ""}) {
  return %x : tensor<f32>
}

// -----

// Parameters are statically shaped f32 tensors.
// expected-error @+1 {{'pe.parameter' op type must be a statically shaped f32 tensor, got 'tensor<?x4xf32>'}}
pe.parameter @w : tensor<?x4xf32> {init = "zeros"}

// -----

// expected-error @+1 {{'pe.parameter' op type must be a statically shaped f32 tensor, got 'tensor<4xi32>'}}
pe.parameter @w : tensor<4xi32> {init = "zeros"}

// -----

// Unknown initializer.
// expected-error @+1 {{'pe.parameter' op init must be one of normal, uniform, zeros, ones, constant, load; got "xavier"}}
pe.parameter @w : tensor<4xf32> {init = "xavier"}

// -----

// Each initializer requires all of its companion attributes.
// expected-error @+1 {{'pe.parameter' op init "normal" requires attribute 'std'}}
pe.parameter @w : tensor<4xf32> {init = "normal", mean = 0.0 : f64, seed = 1 : i64}

// -----

// expected-error @+1 {{'pe.parameter' op init "load" requires attribute 'tensor'}}
pe.parameter @w : tensor<4xf32> {init = "load", file = "w.safetensors"}

// -----

// ... and no other initializer's.
// expected-error @+1 {{'pe.parameter' op attribute 'std' does not apply to init "zeros"}}
pe.parameter @w : tensor<4xf32> {init = "zeros", std = 1.0 : f64}

// -----

// expected-error @+1 {{'pe.parameter' op attribute 'seed' does not apply to init "constant"}}
pe.parameter @w : tensor<4xf32> {init = "constant", value = 1.0 : f64, seed = 1 : i64}

// -----

// The standard deviation is positive.
// expected-error @+1 {{'pe.parameter' op std must be positive, got 0}}
pe.parameter @w : tensor<4xf32> {init = "normal", mean = 0.0 : f64, std = 0.0 : f64, seed = 1 : i64}

// -----

// A uniform range is non-empty.
// expected-error @+1 {{'pe.parameter' op low (1) must be less than high (1)}}
pe.parameter @w : tensor<4xf32> {init = "uniform", low = 1.0 : f64, high = 1.0 : f64, seed = 1 : i64}

// -----

// A load names a file and a tensor.
// expected-error @+1 {{'pe.parameter' op file must not be empty}}
pe.parameter @w : tensor<4xf32> {init = "load", file = "", tensor = "w"}

// -----

// expected-error @+1 {{'pe.parameter' op tensor must not be empty}}
pe.parameter @w : tensor<4xf32> {init = "load", file = "w.safetensors", tensor = ""}

// -----

// Parameters are declared at module level.
func.func @f() {
  // expected-error @+1 {{'pe.parameter' op expects parent op 'builtin.module'}}
  pe.parameter @w : tensor<4xf32> {init = "zeros"}
  return
}

// -----

// get_param names a parameter that exists ...
func.func @f() {
  // expected-error @+1 {{'pe.get_param' op '@w' does not name a pe.parameter}}
  %0 = pe.get_param @w : tensor<4xf32>
  return
}

// -----

// ... and is a pe.parameter ...
func.func @g() {
  return
}
func.func @f() {
  // expected-error @+1 {{'pe.get_param' op '@g' does not name a pe.parameter}}
  %0 = pe.get_param @g : tensor<4xf32>
  return
}

// -----

// ... of exactly the result type.
pe.parameter @w : tensor<4x4xf32> {init = "zeros"}
func.func @f() {
  // expected-error @+1 {{'pe.get_param' op result type 'tensor<4xf32>' does not match the type 'tensor<4x4xf32>' of parameter @w}}
  %0 = pe.get_param @w : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{'pe.optimizer' op kind must be "adamw" or "sgd", got "adam"}}
pe.optimizer {kind = "adam"}

// -----

// expected-error @+1 {{'pe.optimizer' op lr must be positive, got 0}}
pe.optimizer {kind = "adamw", lr = 0.0 : f64}

// -----

// expected-error @+1 {{'pe.optimizer' op beta1 must be in [0, 1), got 1}}
pe.optimizer {kind = "adamw", beta1 = 1.0 : f64}

// -----

// expected-error @+1 {{'pe.optimizer' op beta2 must be in [0, 1), got -0.1}}
pe.optimizer {kind = "adamw", beta2 = -0.1 : f64}

// -----

// expected-error @+1 {{'pe.optimizer' op eps must be positive, got -1e-08}}
pe.optimizer {kind = "adamw", eps = -1.0e-8 : f64}

// -----

// expected-error @+1 {{'pe.optimizer' op weight_decay must be non-negative, got -0.05}}
pe.optimizer {kind = "adamw", weight_decay = -0.05 : f64}

// -----

// expected-error @+1 {{'pe.optimizer' op momentum must be in [0, 1), got 1.5}}
pe.optimizer {kind = "sgd", momentum = 1.5 : f64}

// -----

// expected-error @+1 {{'pe.optimizer' op clip_norm must be non-negative, got -1}}
pe.optimizer {kind = "sgd", clip_norm = -1.0 : f64}

// -----

// expected-error @+1 {{'pe.optimizer' op min_lr must be non-negative, got -1e-05}}
pe.optimizer {kind = "adamw", schedule = "warmup_cosine", min_lr = -1.0e-5 : f64}

// -----

// expected-error @+1 {{'pe.optimizer' op min_lr (0.01) must not exceed lr (0.001)}}
pe.optimizer {kind = "adamw", lr = 1.0e-3 : f64, schedule = "warmup_cosine", min_lr = 1.0e-2 : f64}

// -----

// expected-error @+1 {{'pe.optimizer' op schedule must be "constant" or "warmup_cosine", got "cosine"}}
pe.optimizer {kind = "adamw", schedule = "cosine"}

// -----

// expected-error @+1 {{'pe.optimizer' op warmup_steps must be non-negative, got -10}}
pe.optimizer {kind = "adamw", schedule = "warmup_cosine", warmup_steps = -10 : i64}

// -----

// expected-error @+1 {{'pe.dataset' op kind must be "idx" or "text", got "csv"}}
pe.dataset {kind = "csv", path = "data.csv"}

// -----

// expected-error @+1 {{'pe.dataset' op path must not be empty}}
pe.dataset {kind = "idx", path = ""}

// -----

// expected-error @+1 {{'pe.dataset' op context_length applies only to kind "text"}}
pe.dataset {kind = "idx", path = "mnist", context_length = 8 : i64}

// -----

// expected-error @+1 {{'pe.dataset' op kind "text" requires context_length}}
pe.dataset {kind = "text", path = "corpus.txt"}

// -----

// expected-error @+1 {{'pe.dataset' op context_length must be positive, got 0}}
pe.dataset {kind = "text", path = "corpus.txt", context_length = 0 : i64}

// -----

// expected-error @+1 {{'pe.dataset' op crop_padding, flip and erase apply only to kind "idx"}}
pe.dataset {kind = "text", path = "corpus.txt", context_length = 8 : i64, flip = 0.5 : f64}

// -----

// expected-error @+1 {{'pe.dataset' op crop_padding must be in [0, 64], got 65}}
pe.dataset {kind = "idx", path = "mnist", crop_padding = 65 : i64}

// -----

// expected-error @+1 {{'pe.dataset' op erase must be in [0, 1], got 1.500000e+00}}
pe.dataset {kind = "idx", path = "mnist", erase = 1.5 : f64}

// -----

// A model has one optimizer ...
// expected-note @+1 {{the first is here}}
pe.optimizer {kind = "sgd"}
// expected-error @+1 {{'pe.optimizer' op a module has at most one pe.optimizer}}
pe.optimizer {kind = "adamw"}

// -----

// ... and one dataset.
// expected-note @+1 {{the first is here}}
pe.dataset {kind = "idx", path = "mnist"}
// expected-error @+1 {{'pe.dataset' op a module has at most one pe.dataset}}
pe.dataset {kind = "idx", path = "fashion-mnist"}

// -----

// The optimizer and the data are module-level declarations too.
func.func @f() {
  // expected-error @+1 {{'pe.optimizer' op expects parent op 'builtin.module'}}
  pe.optimizer {kind = "sgd"}
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'pe.dataset' op expects parent op 'builtin.module'}}
  pe.dataset {kind = "idx", path = "mnist"}
  return
}

// -----

// linear: x must have a rank.
func.func @f(%x: tensor<f32>, %w: tensor<4x4xf32>) {
  // expected-error @+1 {{'pe.linear' op operand 'x' must have rank at least 1, got 'tensor<f32>'}}
  %0 = pe.linear %x, %w : tensor<f32>, tensor<4x4xf32> -> tensor<4xf32>
  return
}

// -----

// linear: only the batch of x may be dynamic.
func.func @f(%x: tensor<?x?x64xf32>, %w: tensor<64x8xf32>) {
  // expected-error @+1 {{'pe.linear' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?x64xf32>'}}
  %0 = pe.linear %x, %w : tensor<?x?x64xf32>, tensor<64x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

// linear: w is a matrix.
func.func @f(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'pe.linear' op operand 'w' must have rank 2, got 'tensor<64xf32>'}}
  %0 = pe.linear %x, %w : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

// linear: w is static.
func.func @f(%x: tensor<?x64xf32>, %w: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.linear' op operand 'w' must be fully static, got 'tensor<?x8xf32>'}}
  %0 = pe.linear %x, %w : tensor<?x64xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
  return
}

// -----

// linear: w rows match the last dimension of x.
func.func @f(%x: tensor<?x64xf32>, %w: tensor<32x8xf32>) {
  // expected-error @+1 {{'pe.linear' op operand 'w' must have 64 rows (the last dimension of 'x'), got 'tensor<32x8xf32>'}}
  %0 = pe.linear %x, %w : tensor<?x64xf32>, tensor<32x8xf32> -> tensor<?x8xf32>
  return
}

// -----

// linear: b is a vector.
func.func @f(%x: tensor<?x64xf32>, %w: tensor<64x8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{'pe.linear' op operand 'b' must have rank 1, got 'tensor<1x8xf32>'}}
  %0 = pe.linear %x, %w, %b : tensor<?x64xf32>, tensor<64x8xf32>, tensor<1x8xf32> -> tensor<?x8xf32>
  return
}

// -----

// linear: b has O entries.
func.func @f(%x: tensor<?x64xf32>, %w: tensor<64x8xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'pe.linear' op operand 'b' must have shape [8] ([O]), got 'tensor<64xf32>'}}
  %0 = pe.linear %x, %w, %b : tensor<?x64xf32>, tensor<64x8xf32>, tensor<64xf32> -> tensor<?x8xf32>
  return
}

// -----

// linear: result shape.
func.func @f(%x: tensor<?x64xf32>, %w: tensor<64x8xf32>) {
  // expected-error @+1 {{'pe.linear' op result type must be 'tensor<?x8xf32>', got 'tensor<4x8xf32>'}}
  %0 = pe.linear %x, %w : tensor<?x64xf32>, tensor<64x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// layer_norm: x must have a rank.
func.func @f(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'pe.layer_norm' op operand 'x' must have rank at least 1, got 'tensor<f32>'}}
  %0 = pe.layer_norm %x, %g, %g : tensor<f32>, tensor<1xf32>, tensor<1xf32> -> tensor<f32>
  return
}

// -----

// layer_norm: gamma is a static vector.
func.func @f(%x: tensor<?xf32>, %g: tensor<?xf32>) {
  // expected-error @+1 {{'pe.layer_norm' op operand 'gamma' must be fully static, got 'tensor<?xf32>'}}
  %0 = pe.layer_norm %x, %g, %g : tensor<?xf32>, tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  return
}

// -----

// layer_norm: beta is a vector.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %b: tensor<1x64xf32>) {
  // expected-error @+1 {{'pe.layer_norm' op operand 'beta' must have rank 1, got 'tensor<1x64xf32>'}}
  %0 = pe.layer_norm %x, %g, %b : tensor<?x64xf32>, tensor<64xf32>, tensor<1x64xf32> -> tensor<?x64xf32>
  return
}

// -----

// layer_norm: gamma has D entries.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<32xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'pe.layer_norm' op operand 'gamma' must have shape [64] ([D]), got 'tensor<32xf32>'}}
  %0 = pe.layer_norm %x, %g, %b : tensor<?x64xf32>, tensor<32xf32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

// layer_norm: beta has D entries.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{'pe.layer_norm' op operand 'beta' must have shape [64] ([D]), got 'tensor<32xf32>'}}
  %0 = pe.layer_norm %x, %g, %b : tensor<?x64xf32>, tensor<64xf32>, tensor<32xf32> -> tensor<?x64xf32>
  return
}

// -----

// layer_norm: epsilon is positive.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'pe.layer_norm' op epsilon must be positive, got 0}}
  %0 = pe.layer_norm %x, %g, %g epsilon(0.0) : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

// layer_norm: result has the type of x.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'pe.layer_norm' op result type must be 'tensor<?x64xf32>', got 'tensor<2x64xf32>'}}
  %0 = pe.layer_norm %x, %g, %g : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<2x64xf32>
  return
}

// -----

// gelu: only the batch may be dynamic.
func.func @f(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{'pe.gelu' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<4x?xf32>'}}
  %0 = pe.gelu %x : tensor<4x?xf32> -> tensor<4x?xf32>
  return
}

// -----

// gelu: result has the type of x.
func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.gelu' op result type must be 'tensor<?x8xf32>', got 'tensor<?x4xf32>'}}
  %0 = pe.gelu %x approximate(true) : tensor<?x8xf32> -> tensor<?x4xf32>
  return
}

// -----

// relu: only the batch may be dynamic.
func.func @f(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{'pe.relu' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<4x?xf32>'}}
  %0 = pe.relu %x : tensor<4x?xf32> -> tensor<4x?xf32>
  return
}

// -----

// relu: result has the type of x.
func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.relu' op result type must be 'tensor<?x8xf32>', got 'tensor<8xf32>'}}
  %0 = pe.relu %x : tensor<?x8xf32> -> tensor<8xf32>
  return
}

// -----

// add: lhs may be dynamic only in the batch.
func.func @f(%a: tensor<4x?xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'pe.add' op operand 'lhs' may be dynamic only in dimension 0 (the batch), got 'tensor<4x?xf32>'}}
  %0 = pe.add %a, %b : tensor<4x?xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// mul: rhs may be dynamic only in the batch.
func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x?xf32>) {
  // expected-error @+1 {{'pe.mul' op operand 'rhs' may be dynamic only in dimension 0 (the batch), got 'tensor<4x?xf32>'}}
  %0 = pe.mul %a, %b : tensor<4x8xf32>, tensor<4x?xf32> -> tensor<4x8xf32>
  return
}

// -----

// add: the shorter shape is a trailing suffix of the longer.
func.func @f(%a: tensor<?x50x64xf32>, %b: tensor<49x64xf32>) {
  // expected-error @+1 {{'pe.add' op operand shapes [?, 50, 64] and [49, 64] do not broadcast: the lower-rank shape must equal the trailing dimensions of the other}}
  %0 = pe.add %a, %b : tensor<?x50x64xf32>, tensor<49x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// mul: equal ranks need equal shapes, batch included.
func.func @f(%a: tensor<?x64xf32>, %b: tensor<2x64xf32>) {
  // expected-error @+1 {{'pe.mul' op operand shapes [?, 64] and [2, 64] do not broadcast}}
  %0 = pe.mul %a, %b : tensor<?x64xf32>, tensor<2x64xf32> -> tensor<?x64xf32>
  return
}

// -----

// sub: the result has the longer shape.
func.func @f(%a: tensor<64xf32>, %b: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.sub' op result type must be 'tensor<?x64xf32>', got 'tensor<64xf32>'}}
  %0 = pe.sub %a, %b : tensor<64xf32>, tensor<?x64xf32> -> tensor<64xf32>
  return
}

// -----

// dropout: p in [0, 1).
func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.dropout' op p must be in [0, 1), found 1}}
  %0 = pe.dropout %x p(1.0) stream(0) : tensor<?x8xf32> -> tensor<?x8xf32>
  return
}

// -----

// dropout: p in [0, 1).
func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.dropout' op p must be in [0, 1), found -0.5}}
  %0 = pe.dropout %x p(-0.5) stream(0) : tensor<?x8xf32> -> tensor<?x8xf32>
  return
}

// -----

// dropout: stream in [0, 2^31).
func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.dropout' op stream must be in [0, 2^31), found 2147483648}}
  %0 = pe.dropout %x p(0.5) stream(2147483648) : tensor<?x8xf32> -> tensor<?x8xf32>
  return
}

// -----

// dropout: the mask is drawn per sample: x has the batch first.
func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'pe.dropout' op 'x' must have the batch dimension first (the mask is drawn per sample), found [4, 8]}}
  %0 = pe.dropout %x p(0.5) stream(0) : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// dropout: at least rank 1.
func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{'pe.dropout' op operand 'x' must have rank at least 1}}
  %0 = pe.dropout %x p(0.5) stream(0) : tensor<f32> -> tensor<f32>
  return
}

// -----

// dropout: result has the type of x.
func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.dropout' op result type must be 'tensor<?x8xf32>', got 'tensor<?x4xf32>'}}
  %0 = pe.dropout %x p(0.5) stream(0) : tensor<?x8xf32> -> tensor<?x4xf32>
  return
}

// -----

// scale: only the batch may be dynamic.
func.func @f(%x: tensor<?x?xf32>) {
  // expected-error @+1 {{'pe.scale' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?xf32>'}}
  %0 = pe.scale %x factor(2.0) : tensor<?x?xf32> -> tensor<?x?xf32>
  return
}

// -----

// scale: result has the type of x.
func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{'pe.scale' op result type must be 'tensor<f32>', got 'tensor<1xf32>'}}
  %0 = pe.scale %x factor(2.0) bias(1.0) : tensor<f32> -> tensor<1xf32>
  return
}

// -----

// mean: only the batch may be dynamic.
func.func @f(%x: tensor<?x?xf32>) {
  // expected-error @+1 {{'pe.mean' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?xf32>'}}
  %0 = pe.mean %x : tensor<?x?xf32> -> tensor<f32>
  return
}

// -----

// mean: axis is a dimension of x.
func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.mean' op axis 2 is out of range for operand 'x' of rank 2}}
  %0 = pe.mean %x axis(2) : tensor<?x8xf32> -> tensor<?xf32>
  return
}

// -----

// mean: negative axes are not accepted.
func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.mean' op axis -1 is out of range for operand 'x' of rank 2}}
  %0 = pe.mean %x axis(-1) : tensor<?x8xf32> -> tensor<?xf32>
  return
}

// -----

// mean: the axis is removed.
func.func @f(%x: tensor<?x8x4xf32>) {
  // expected-error @+1 {{'pe.mean' op result type must be 'tensor<?x4xf32>', got 'tensor<?x8xf32>'}}
  %0 = pe.mean %x axis(1) : tensor<?x8x4xf32> -> tensor<?x8xf32>
  return
}

// -----

// mean: without an axis the result is a scalar.
func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.mean' op result type must be 'tensor<f32>', got 'tensor<1xf32>'}}
  %0 = pe.mean %x : tensor<?x8xf32> -> tensor<1xf32>
  return
}

// -----

// patch_embed: image is [B, C, H, W].
func.func @f(%i: tensor<?x28x28xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'pe.patch_embed' op operand 'image' must have rank 4, got 'tensor<?x28x28xf32>'}}
  %0 = pe.patch_embed %i, %w, %b patch(4) : tensor<?x28x28xf32>, tensor<16x64xf32>, tensor<64xf32> -> tensor<?x49x64xf32>
  return
}

// -----

// patch_embed: w is static.
func.func @f(%i: tensor<?x1x28x28xf32>, %w: tensor<16x?xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'pe.patch_embed' op operand 'w' must be fully static, got 'tensor<16x?xf32>'}}
  %0 = pe.patch_embed %i, %w, %b patch(4) : tensor<?x1x28x28xf32>, tensor<16x?xf32>, tensor<64xf32> -> tensor<?x49x64xf32>
  return
}

// -----

// patch_embed: b is a vector.
func.func @f(%i: tensor<?x1x28x28xf32>, %w: tensor<16x64xf32>, %b: tensor<1x64xf32>) {
  // expected-error @+1 {{'pe.patch_embed' op operand 'b' must have rank 1, got 'tensor<1x64xf32>'}}
  %0 = pe.patch_embed %i, %w, %b patch(4) : tensor<?x1x28x28xf32>, tensor<16x64xf32>, tensor<1x64xf32> -> tensor<?x49x64xf32>
  return
}

// -----

// patch_embed: patch is positive.
func.func @f(%i: tensor<?x1x28x28xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'pe.patch_embed' op patch must be positive, got 0}}
  %0 = pe.patch_embed %i, %w, %b patch(0) : tensor<?x1x28x28xf32>, tensor<16x64xf32>, tensor<64xf32> -> tensor<?x49x64xf32>
  return
}

// -----

// patch_embed: patch divides H and W.
func.func @f(%i: tensor<?x1x28x28xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'pe.patch_embed' op patch 5 must divide the image height 28 and width 28}}
  %0 = pe.patch_embed %i, %w, %b patch(5) : tensor<?x1x28x28xf32>, tensor<16x64xf32>, tensor<64xf32> -> tensor<?x25x64xf32>
  return
}

// -----

// patch_embed: w has C*p*p rows.
func.func @f(%i: tensor<?x3x28x28xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'pe.patch_embed' op operand 'w' must have C*p*p = 48 rows, got 'tensor<16x64xf32>'}}
  %0 = pe.patch_embed %i, %w, %b patch(4) : tensor<?x3x28x28xf32>, tensor<16x64xf32>, tensor<64xf32> -> tensor<?x49x64xf32>
  return
}

// -----

// patch_embed: b has D entries.
func.func @f(%i: tensor<?x1x28x28xf32>, %w: tensor<16x64xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{'pe.patch_embed' op operand 'b' must have shape [64] ([D]), got 'tensor<32xf32>'}}
  %0 = pe.patch_embed %i, %w, %b patch(4) : tensor<?x1x28x28xf32>, tensor<16x64xf32>, tensor<32xf32> -> tensor<?x49x64xf32>
  return
}

// -----

// patch_embed: result is [B, (H/p)(W/p), D].
func.func @f(%i: tensor<?x1x28x28xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'pe.patch_embed' op result type must be 'tensor<?x49x64xf32>', got 'tensor<?x7x7x64xf32>'}}
  %0 = pe.patch_embed %i, %w, %b patch(4) : tensor<?x1x28x28xf32>, tensor<16x64xf32>, tensor<64xf32> -> tensor<?x7x7x64xf32>
  return
}

// -----

// token_embed: ids are [B, T].
func.func @f(%ids: tensor<?xi32>, %t: tensor<256x16xf32>) {
  // expected-error @+1 {{'pe.token_embed' op operand 'ids' must have rank 2, got 'tensor<?xi32>'}}
  %0 = pe.token_embed %ids, %t : tensor<?xi32>, tensor<256x16xf32> -> tensor<?x16xf32>
  return
}

// -----

// token_embed: ids are i32.
func.func @f(%ids: tensor<?x8xf32>, %t: tensor<256x16xf32>) {
  // expected-error @+1 {{'pe.token_embed' op operand #0 must be ranked tensor of 32-bit signless integer values}}
  %0 = pe.token_embed %ids, %t : tensor<?x8xf32>, tensor<256x16xf32> -> tensor<?x8x16xf32>
  return
}

// -----

// token_embed: table is static.
func.func @f(%ids: tensor<?x8xi32>, %t: tensor<?x16xf32>) {
  // expected-error @+1 {{'pe.token_embed' op operand 'table' must be fully static, got 'tensor<?x16xf32>'}}
  %0 = pe.token_embed %ids, %t : tensor<?x8xi32>, tensor<?x16xf32> -> tensor<?x8x16xf32>
  return
}

// -----

// token_embed: result is [B, T, D].
func.func @f(%ids: tensor<?x8xi32>, %t: tensor<256x16xf32>) {
  // expected-error @+1 {{'pe.token_embed' op result type must be 'tensor<?x8x16xf32>', got 'tensor<?x8x256xf32>'}}
  %0 = pe.token_embed %ids, %t : tensor<?x8xi32>, tensor<256x16xf32> -> tensor<?x8x256xf32>
  return
}

// -----

// class_token: x is [B, N, D].
func.func @f(%x: tensor<?x64xf32>, %c: tensor<64xf32>) {
  // expected-error @+1 {{'pe.class_token' op operand 'x' must have rank 3, got 'tensor<?x64xf32>'}}
  %0 = pe.class_token %x, %c : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x65xf32>
  return
}

// -----

// class_token: cls is static.
func.func @f(%x: tensor<?x49x64xf32>, %c: tensor<?xf32>) {
  // expected-error @+1 {{'pe.class_token' op operand 'cls' must be fully static, got 'tensor<?xf32>'}}
  %0 = pe.class_token %x, %c : tensor<?x49x64xf32>, tensor<?xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// class_token: cls has D entries.
func.func @f(%x: tensor<?x49x64xf32>, %c: tensor<32xf32>) {
  // expected-error @+1 {{'pe.class_token' op operand 'cls' must have shape [64] ([D]), got 'tensor<32xf32>'}}
  %0 = pe.class_token %x, %c : tensor<?x49x64xf32>, tensor<32xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// class_token: the result has one more token.
func.func @f(%x: tensor<?x49x64xf32>, %c: tensor<64xf32>) {
  // expected-error @+1 {{'pe.class_token' op result type must be 'tensor<?x50x64xf32>', got 'tensor<?x49x64xf32>'}}
  %0 = pe.class_token %x, %c : tensor<?x49x64xf32>, tensor<64xf32> -> tensor<?x49x64xf32>
  return
}

// -----

// select_token: x is [B, T, D].
func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.select_token' op operand 'x' must have rank 3, got 'tensor<?x64xf32>'}}
  %0 = pe.select_token %x index(0) : tensor<?x64xf32> -> tensor<?xf32>
  return
}

// -----

// select_token: index is a token of x.
func.func @f(%x: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.select_token' op index 50 is out of range for 50 tokens}}
  %0 = pe.select_token %x index(50) : tensor<?x50x64xf32> -> tensor<?x64xf32>
  return
}

// -----

// select_token: result is [B, D].
func.func @f(%x: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.select_token' op result type must be 'tensor<?x64xf32>', got 'tensor<?x1x64xf32>'}}
  %0 = pe.select_token %x index(0) : tensor<?x50x64xf32> -> tensor<?x1x64xf32>
  return
}

// -----

// attention: q is [B, T, D].
func.func @f(%q: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.attention' op operand 'q' must have rank 3, got 'tensor<?x64xf32>'}}
  %0 = pe.attention %q, %q, %q heads(4) scale(0.25) mask(none) : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return
}

// -----

// attention: q, k and v share a type.
func.func @f(%q: tensor<?x50x64xf32>, %k: tensor<?x49x64xf32>) {
  // expected-error @+1 {{'pe.attention' op operands 'q', 'k' and 'v' must have the same type, got 'tensor<?x50x64xf32>', 'tensor<?x49x64xf32>', 'tensor<?x50x64xf32>'}}
  %0 = pe.attention %q, %k, %q heads(4) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x49x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: heads divide the width.
func.func @f(%q: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.attention' op heads (3) must be positive and divide the model width 64}}
  %0 = pe.attention %q, %q, %q heads(3) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: heads are positive.
func.func @f(%q: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.attention' op heads (0) must be positive and divide the model width 64}}
  %0 = pe.attention %q, %q, %q heads(0) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: rel is static.
func.func @f(%q: tensor<?x50x64xf32>, %r: tensor<50x50x16x?xf32>) {
  // expected-error @+1 {{'pe.attention' op operand 'rel' must be fully static, got 'tensor<50x50x16x?xf32>'}}
  %0 = pe.attention %q, %q, %q, %r heads(4) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x50x16x?xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: rel is [T, T, Dh, Dh] (Dh).
func.func @f(%q: tensor<?x50x64xf32>, %r: tensor<50x50x64x64xf32>) {
  // expected-error @+1 {{'pe.attention' op operand 'rel' must have shape [50, 50, 16, 16] ([T, T, Dh, Dh]), got 'tensor<50x50x64x64xf32>'}}
  %0 = pe.attention %q, %q, %q, %r heads(4) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x50x64x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: rel is [T, T, Dh, Dh] (T).
func.func @f(%q: tensor<?x50x64xf32>, %r: tensor<49x49x16x16xf32>) {
  // expected-error @+1 {{'pe.attention' op operand 'rel' must have shape [50, 50, 16, 16] ([T, T, Dh, Dh]), got 'tensor<49x49x16x16xf32>'}}
  %0 = pe.attention %q, %q, %q, %r heads(4) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<49x49x16x16xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: scale is positive.
func.func @f(%q: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.attention' op scale must be positive, got -0.25}}
  %0 = pe.attention %q, %q, %q heads(4) scale(-0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: mask skip needs skip_base.
func.func @f(%q: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.attention' op mask 'skip' requires skip_base}}
  %0 = pe.attention %q, %q, %q heads(4) scale(0.25) mask(skip) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: skip_base only with mask skip.
func.func @f(%q: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.attention' op skip_base applies only to mask 'skip'}}
  %0 = pe.attention %q, %q, %q heads(4) scale(0.25) mask(causal) skip_base(1) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: skip_base is non-negative.
func.func @f(%q: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.attention' op skip_base must be non-negative, got -1}}
  %0 = pe.attention %q, %q, %q heads(4) scale(0.25) mask(skip) skip_base(-1) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// attention: result has the type of q.
func.func @f(%q: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.attention' op result type must be 'tensor<?x50x64xf32>', got 'tensor<?x50x16xf32>'}}
  %0 = pe.attention %q, %q, %q heads(4) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x16xf32>
  return
}

// -----

// cross_entropy: logits have a class dimension.
func.func @f(%l: tensor<f32>, %y: tensor<i32>) {
  // expected-error @+1 {{'pe.cross_entropy' op operand 'logits' must have rank at least 1, got 'tensor<f32>'}}
  %0 = pe.cross_entropy %l, %y : tensor<f32>, tensor<i32> -> tensor<f32>
  return
}

// -----

// cross_entropy: labels may be dynamic only in the batch.
func.func @f(%l: tensor<?x8x10xf32>, %y: tensor<?x?xi32>) {
  // expected-error @+1 {{'pe.cross_entropy' op operand 'labels' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?xi32>'}}
  %0 = pe.cross_entropy %l, %y : tensor<?x8x10xf32>, tensor<?x?xi32> -> tensor<f32>
  return
}

// -----

// cross_entropy: label smoothing lies in [0, 1).
func.func @f(%l: tensor<?x10xf32>, %y: tensor<?xi32>) {
  // expected-error @+1 {{'pe.cross_entropy' op smoothing must be in [0, 1), got -1.000000e-01}}
  %0 = pe.cross_entropy %l, %y {smoothing = -0.1 : f64} : tensor<?x10xf32>, tensor<?xi32> -> tensor<f32>
  return
}

// -----

// cross_entropy: the class dimension is static.
func.func @f(%l: tensor<?xf32>, %y: tensor<i32>) {
  // expected-error @+1 {{'pe.cross_entropy' op the class dimension of 'logits' must be static, got 'tensor<?xf32>'}}
  %0 = pe.cross_entropy %l, %y : tensor<?xf32>, tensor<i32> -> tensor<f32>
  return
}

// -----

// cross_entropy: labels are logits without the class dimension.
func.func @f(%l: tensor<?x10xf32>, %y: tensor<?x10xi32>) {
  // expected-error @+1 {{'pe.cross_entropy' op operand 'labels' must have shape [?] (the shape of 'logits' without its last dimension), got 'tensor<?x10xi32>'}}
  %0 = pe.cross_entropy %l, %y : tensor<?x10xf32>, tensor<?x10xi32> -> tensor<f32>
  return
}

// -----

// cross_entropy: labels are i32.
func.func @f(%l: tensor<?x10xf32>, %y: tensor<?xf32>) {
  // expected-error @+1 {{'pe.cross_entropy' op operand #1 must be ranked tensor of 32-bit signless integer values}}
  %0 = pe.cross_entropy %l, %y : tensor<?x10xf32>, tensor<?xf32> -> tensor<f32>
  return
}

// -----

// cross_entropy: the loss is a scalar.
func.func @f(%l: tensor<?x10xf32>, %y: tensor<?xi32>) {
  // expected-error @+1 {{'pe.cross_entropy' op result #0 must be 0D tensor of 32-bit float values}}
  %0 = pe.cross_entropy %l, %y : tensor<?x10xf32>, tensor<?xi32> -> tensor<1xf32>
  return
}

// -----

// seq_positions: length is positive.
func.func @f() {
  // expected-error @+1 {{'pe.seq_positions' op length must be positive, got 0}}
  %0 = pe.seq_positions length(0) : tensor<0x1xf32>
  return
}

// -----

// seq_positions: special is non-negative.
func.func @f() {
  // expected-error @+1 {{'pe.seq_positions' op special must be non-negative, got -1}}
  %0 = pe.seq_positions length(4) special(-1) : tensor<3x1xf32>
  return
}

// -----

// seq_positions: result is [special + length, 1].
func.func @f() {
  // expected-error @+1 {{'pe.seq_positions' op result type must be 'tensor<5x1xf32>', got 'tensor<4x1xf32>'}}
  %0 = pe.seq_positions length(4) special(1) : tensor<4x1xf32>
  return
}

// -----

// grid_positions: rows and cols are positive.
func.func @f() {
  // expected-error @+1 {{'pe.grid_positions' op rows and cols must be positive, got 7 x 0}}
  %0 = pe.grid_positions rows(7) cols(0) : tensor<0x2xf32>
  return
}

// -----

// grid_positions: special is non-negative.
func.func @f() {
  // expected-error @+1 {{'pe.grid_positions' op special must be non-negative, got -2}}
  %0 = pe.grid_positions rows(2) cols(2) special(-2) : tensor<2x2xf32>
  return
}

// -----

// grid_positions: result is [special + rows*cols, 2].
func.func @f() {
  // expected-error @+1 {{'pe.grid_positions' op result type must be 'tensor<50x2xf32>', got 'tensor<50x1xf32>'}}
  %0 = pe.grid_positions rows(7) cols(7) special(1) : tensor<50x1xf32>
  return
}

// -----

// rope_freqs: dim is positive.
func.func @f() {
  // expected-error @+1 {{'pe.rope_freqs' op dim must be positive, got 0}}
  %0 = pe.rope_freqs kind(seq) dim(0) heads(1) base(10000.0) : tensor<0x1xf32>
  return
}

// -----

// rope_freqs: heads divide dim.
func.func @f() {
  // expected-error @+1 {{'pe.rope_freqs' op heads (5) must be positive and divide dim 64}}
  %0 = pe.rope_freqs kind(seq) dim(64) heads(5) base(10000.0) : tensor<32x1xf32>
  return
}

// -----

// rope_freqs: the head dimension is even.
func.func @f() {
  // expected-error @+1 {{'pe.rope_freqs' op head dimension must be a multiple of 2 for kind 'seq', got 3}}
  %0 = pe.rope_freqs kind(seq) dim(12) heads(4) base(10000.0) : tensor<6x1xf32>
  return
}

// -----

// rope_freqs: axial splits each head's pairs between two axes.
func.func @f() {
  // expected-error @+1 {{'pe.rope_freqs' op head dimension must be a multiple of 4 for kind 'axial', got 6}}
  %0 = pe.rope_freqs kind(axial) dim(24) heads(4) base(100.0) : tensor<12x2xf32>
  return
}

// -----

// rope_freqs: base is positive.
func.func @f() {
  // expected-error @+1 {{'pe.rope_freqs' op base must be positive, got 0}}
  %0 = pe.rope_freqs kind(seq) dim(64) heads(4) base(0.0) : tensor<32x1xf32>
  return
}

// -----

// rope_freqs: result is [dim/2, 2] for axial.
func.func @f() {
  // expected-error @+1 {{'pe.rope_freqs' op result type must be 'tensor<32x2xf32>', got 'tensor<32x1xf32>'}}
  %0 = pe.rope_freqs kind(axial) dim(64) heads(4) base(100.0) : tensor<32x1xf32>
  return
}

// -----

// rope_freqs: kind is seq or axial.
func.func @f() {
  // expected-error @+1 {{custom op 'pe.rope_freqs' invalid rotary frequency table layout specification: mixed}}
  %0 = pe.rope_freqs kind(mixed) dim(64) heads(4) base(100.0) : tensor<32x2xf32>
  return
}

// -----

// rope: x is [B, T, D].
func.func @f(%x: tensor<?x64xf32>, %p: tensor<50x2xf32>, %f: tensor<32x2xf32>) {
  // expected-error @+1 {{'pe.rope' op operand 'x' must have rank 3, got 'tensor<?x64xf32>'}}
  %0 = pe.rope %x, %p, %f mode(axial) : tensor<?x64xf32>, tensor<50x2xf32>, tensor<32x2xf32> -> tensor<?x64xf32>
  return
}

// -----

// rope: positions are static.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<?x2xf32>, %f: tensor<32x2xf32>) {
  // expected-error @+1 {{'pe.rope' op operand 'pos' must be fully static, got 'tensor<?x2xf32>'}}
  %0 = pe.rope %x, %p, %f mode(axial) : tensor<?x50x64xf32>, tensor<?x2xf32>, tensor<32x2xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// rope: the width is even.
func.func @f(%x: tensor<?x50x63xf32>, %p: tensor<50x2xf32>, %f: tensor<31x2xf32>) {
  // expected-error @+1 {{'pe.rope' op the last dimension of 'x' must be even (interleaved pairs), got 63}}
  %0 = pe.rope %x, %p, %f mode(axial) : tensor<?x50x63xf32>, tensor<50x2xf32>, tensor<31x2xf32> -> tensor<?x50x63xf32>
  return
}

// -----

// rope: one position per token.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<49x2xf32>, %f: tensor<32x2xf32>) {
  // expected-error @+1 {{'pe.rope' op operand 'pos' must have 50 rows (the tokens of 'x'), got 'tensor<49x2xf32>'}}
  %0 = pe.rope %x, %p, %f mode(axial) : tensor<?x50x64xf32>, tensor<49x2xf32>, tensor<32x2xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// rope: 1 or 2 position axes.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x3xf32>, %f: tensor<32x3xf32>) {
  // expected-error @+1 {{'pe.rope' op operand 'pos' must have 1 or 2 axes, got 3}}
  %0 = pe.rope %x, %p, %f mode(mixed) : tensor<?x50x64xf32>, tensor<50x3xf32>, tensor<32x3xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// rope: freqs are static.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x2xf32>, %f: tensor<?x2xf32>) {
  // expected-error @+1 {{'pe.rope' op operand 'freqs' must be fully static, got 'tensor<?x2xf32>'}}
  %0 = pe.rope %x, %p, %f mode(axial) : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<?x2xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// rope: freqs have D/2 rows.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x2xf32>, %f: tensor<16x2xf32>) {
  // expected-error @+1 {{'pe.rope' op operand 'freqs' must have shape [32, 2] ([D/2, A]), got 'tensor<16x2xf32>'}}
  %0 = pe.rope %x, %p, %f mode(axial) : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<16x2xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// rope: freqs have one column per position axis.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x2xf32>, %f: tensor<32x1xf32>) {
  // expected-error @+1 {{'pe.rope' op operand 'freqs' must have shape [32, 2] ([D/2, A]), got 'tensor<32x1xf32>'}}
  %0 = pe.rope %x, %p, %f mode(axial) : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x1xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// rope: result has the type of x.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x2xf32>, %f: tensor<32x2xf32>) {
  // expected-error @+1 {{'pe.rope' op result type must be 'tensor<?x50x64xf32>', got 'tensor<2x50x64xf32>'}}
  %0 = pe.rope %x, %p, %f mode(axial) : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32> -> tensor<2x50x64xf32>
  return
}

// -----

// rope: mode seq needs one axis.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x2xf32>, %f: tensor<32x2xf32>) {
  // expected-error @+1 {{'pe.rope' op mode 'seq' needs 1 position axes, got 2}}
  %0 = pe.rope %x, %p, %f mode(seq) : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// rope: mode axial needs two axes.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x1xf32>, %f: tensor<32x1xf32>) {
  // expected-error @+1 {{'pe.rope' op mode 'axial' needs 2 position axes, got 1}}
  %0 = pe.rope %x, %p, %f mode(axial) : tensor<?x50x64xf32>, tensor<50x1xf32>, tensor<32x1xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// rope: mode is seq, axial or mixed.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x1xf32>, %f: tensor<32x1xf32>) {
  // expected-error @+1 {{custom op 'pe.rope' expected keyword for rotary embedding mode}}
  %0 = pe.rope %x, %p, %f mode(1d) : tensor<?x50x64xf32>, tensor<50x1xf32>, tensor<32x1xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// householder: the width is even.
func.func @f(%x: tensor<?x50x7xf32>, %p: tensor<50x2xf32>, %f: tensor<3x2xf32>) {
  // expected-error @+1 {{'pe.householder' op the last dimension of 'x' must be even (interleaved pairs), got 7}}
  %0 = pe.householder %x, %p, %f, %f : tensor<?x50x7xf32>, tensor<50x2xf32>, tensor<3x2xf32>, tensor<3x2xf32> -> tensor<?x50x7xf32>
  return
}

// -----

// householder: f2 is [D/2, A].
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x2xf32>, %f: tensor<32x2xf32>, %g: tensor<32x1xf32>) {
  // expected-error @+1 {{'pe.householder' op operand 'f2' must have shape [32, 2] ([D/2, A]), got 'tensor<32x1xf32>'}}
  %0 = pe.householder %x, %p, %f, %g : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32>, tensor<32x1xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// householder: result has the type of x.
func.func @f(%x: tensor<?x50x64xf32>, %p: tensor<50x2xf32>, %f: tensor<32x2xf32>) {
  // expected-error @+1 {{'pe.householder' op result type must be 'tensor<?x50x64xf32>', got 'tensor<?x50x32xf32>'}}
  %0 = pe.householder %x, %p, %f, %f : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32>, tensor<32x2xf32> -> tensor<?x50x32xf32>
  return
}

// -----

// skew: params are static.
func.func @f(%p: tensor<?x6xf32>) {
  // expected-error @+1 {{'pe.skew' op operand 'params' must be fully static, got 'tensor<?x6xf32>'}}
  %0 = pe.skew %p dim(4) : tensor<?x6xf32> -> tensor<?x4x4xf32>
  return
}

// -----

// skew: params have a rank.
func.func @f(%p: tensor<f32>) {
  // expected-error @+1 {{'pe.skew' op operand 'params' must have rank at least 1, got 'tensor<f32>'}}
  %0 = pe.skew %p dim(2) : tensor<f32> -> tensor<2x2xf32>
  return
}

// -----

// skew: dim is at least 2.
func.func @f(%p: tensor<1xf32>) {
  // expected-error @+1 {{'pe.skew' op dim must be at least 2, got 1}}
  %0 = pe.skew %p dim(1) : tensor<1xf32> -> tensor<1x1xf32>
  return
}

// -----

// skew: dim(dim-1)/2 parameters.
func.func @f(%p: tensor<2016xf32>) {
  // expected-error @+1 {{'pe.skew' op operand 'params' must have dim*(dim-1)/2 = 1953 entries in its last dimension, got 'tensor<2016xf32>'}}
  %0 = pe.skew %p dim(63) : tensor<2016xf32> -> tensor<63x63xf32>
  return
}

// -----

// skew: result is [..., dim, dim].
func.func @f(%p: tensor<2x6xf32>) {
  // expected-error @+1 {{'pe.skew' op result type must be 'tensor<2x4x4xf32>', got 'tensor<4x4xf32>'}}
  %0 = pe.skew %p dim(4) : tensor<2x6xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: params are a static vector.
func.func @f(%p: tensor<1x3xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op operand 'params' must have rank 1, got 'tensor<1x3xf32>'}}
  %0 = pe.sparse_skew %p dim(4) fraction(0.5) seed(7) support([0, 2, 5]) : tensor<1x3xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: dim is at least 2.
func.func @f(%p: tensor<1xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op dim must be at least 2, got 1}}
  %0 = pe.sparse_skew %p dim(1) fraction(0.5) seed(7) support([0]) : tensor<1xf32> -> tensor<1x1xf32>
  return
}

// -----

// sparse_skew: fraction is in (0, 1].
func.func @f(%p: tensor<3xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op fraction must be in (0, 1], got 0}}
  %0 = pe.sparse_skew %p dim(4) fraction(0.0) seed(7) support([0, 2, 5]) : tensor<3xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: fraction is at most 1.
func.func @f(%p: tensor<3xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op fraction must be in (0, 1], got 1.5}}
  %0 = pe.sparse_skew %p dim(4) fraction(1.5) seed(7) support([0, 2, 5]) : tensor<3xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: support is not empty.
func.func @f(%p: tensor<0xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op support must not be empty}}
  %0 = pe.sparse_skew %p dim(4) fraction(0.5) seed(7) support([]) : tensor<0xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: support indices are upper-triangle positions.
func.func @f(%p: tensor<3xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op support index 6 is out of range [0, 6)}}
  %0 = pe.sparse_skew %p dim(4) fraction(0.5) seed(7) support([0, 2, 6]) : tensor<3xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: support indices are non-negative.
func.func @f(%p: tensor<3xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op support index -1 is out of range [0, 6)}}
  %0 = pe.sparse_skew %p dim(4) fraction(0.5) seed(7) support([-1, 2, 5]) : tensor<3xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: support is sorted.
func.func @f(%p: tensor<3xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op support must be strictly increasing, got 5 before 2}}
  %0 = pe.sparse_skew %p dim(4) fraction(0.5) seed(7) support([0, 5, 2]) : tensor<3xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: support has no duplicates.
func.func @f(%p: tensor<3xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op support must be strictly increasing, got 2 before 2}}
  %0 = pe.sparse_skew %p dim(4) fraction(0.5) seed(7) support([0, 2, 2]) : tensor<3xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: one parameter per support index.
func.func @f(%p: tensor<4xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op operand 'params' must have one entry per support index (3), got 'tensor<4xf32>'}}
  %0 = pe.sparse_skew %p dim(4) fraction(0.5) seed(7) support([0, 2, 5]) : tensor<4xf32> -> tensor<4x4xf32>
  return
}

// -----

// sparse_skew: result is [dim, dim].
func.func @f(%p: tensor<3xf32>) {
  // expected-error @+1 {{'pe.sparse_skew' op result type must be 'tensor<4x4xf32>', got 'tensor<3x3xf32>'}}
  %0 = pe.sparse_skew %p dim(4) fraction(0.5) seed(7) support([0, 2, 5]) : tensor<3xf32> -> tensor<3x3xf32>
  return
}

// -----

// cayley: only the batch of x may be dynamic.
func.func @f(%x: tensor<?x?xf32>, %s: tensor<8x8xf32>) {
  // expected-error @+1 {{'pe.cayley' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?xf32>'}}
  %0 = pe.cayley %x, %s : tensor<?x?xf32>, tensor<8x8xf32> -> tensor<?x?xf32>
  return
}

// -----

// cayley: s is a static matrix.
func.func @f(%x: tensor<?x8xf32>, %s: tensor<64xf32>) {
  // expected-error @+1 {{'pe.cayley' op operand 's' must have rank 2, got 'tensor<64xf32>'}}
  %0 = pe.cayley %x, %s : tensor<?x8xf32>, tensor<64xf32> -> tensor<?x8xf32>
  return
}

// -----

// cayley: s is [D, D].
func.func @f(%x: tensor<?x8xf32>, %s: tensor<8x4xf32>) {
  // expected-error @+1 {{'pe.cayley' op operand 's' must have shape [8, 8] ([D, D]), got 'tensor<8x4xf32>'}}
  %0 = pe.cayley %x, %s : tensor<?x8xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
  return
}

// -----

// cayley: result has the type of x.
func.func @f(%x: tensor<?x8xf32>, %s: tensor<8x8xf32>) {
  // expected-error @+1 {{'pe.cayley' op result type must be 'tensor<?x8xf32>', got 'tensor<8x8xf32>'}}
  %0 = pe.cayley %x, %s : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return
}

// -----

// relative_positions: positions are static [T, A].
func.func @f(%p: tensor<?x2xf32>) {
  // expected-error @+1 {{'pe.relative_positions' op operand 'pos' must be fully static, got 'tensor<?x2xf32>'}}
  %0 = pe.relative_positions %p : tensor<?x2xf32> -> tensor<?x?x2xf32>
  return
}

// -----

// relative_positions: result is [T, T, A].
func.func @f(%p: tensor<10x2xf32>) {
  // expected-error @+1 {{'pe.relative_positions' op result type must be 'tensor<10x10x2xf32>', got 'tensor<10x10xf32>'}}
  %0 = pe.relative_positions %p : tensor<10x2xf32> -> tensor<10x10xf32>
  return
}

// -----

// generator_exp: r is static.
func.func @f(%r: tensor<?x2xf32>, %l: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'pe.generator_exp' op operand 'r' must be fully static, got 'tensor<?x2xf32>'}}
  %0 = pe.generator_exp %r, %l : tensor<?x2xf32>, tensor<2x4x4xf32> -> tensor<?x4x4xf32>
  return
}

// -----

// generator_exp: generators are [K, d, d].
func.func @f(%r: tensor<10x2xf32>, %l: tensor<2x16xf32>) {
  // expected-error @+1 {{'pe.generator_exp' op operand 'generators' must have rank 3, got 'tensor<2x16xf32>'}}
  %0 = pe.generator_exp %r, %l : tensor<10x2xf32>, tensor<2x16xf32> -> tensor<10x4x4xf32>
  return
}

// -----

// generator_exp: generators are square.
func.func @f(%r: tensor<10x2xf32>, %l: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'pe.generator_exp' op operand 'generators' must hold square matrices [K, d, d], got 'tensor<2x4x3xf32>'}}
  %0 = pe.generator_exp %r, %l : tensor<10x2xf32>, tensor<2x4x3xf32> -> tensor<10x4x3xf32>
  return
}

// -----

// generator_exp: one coordinate per generator.
func.func @f(%r: tensor<10x2xf32>, %l: tensor<3x4x4xf32>) {
  // expected-error @+1 {{'pe.generator_exp' op the last dimension of 'r' (2) must equal the number of generators (3)}}
  %0 = pe.generator_exp %r, %l : tensor<10x2xf32>, tensor<3x4x4xf32> -> tensor<10x4x4xf32>
  return
}

// -----

// generator_exp: result is [..., d, d].
func.func @f(%r: tensor<10x10x2xf32>, %l: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'pe.generator_exp' op result type must be 'tensor<10x10x4x4xf32>', got 'tensor<10x4x4xf32>'}}
  %0 = pe.generator_exp %r, %l : tensor<10x10x2xf32>, tensor<2x4x4xf32> -> tensor<10x4x4xf32>
  return
}

// -----

// apply_rotation: x is [B, T, D].
func.func @f(%x: tensor<?x64xf32>, %r: tensor<50x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation' op operand 'x' must have rank 3, got 'tensor<?x64xf32>'}}
  %0 = pe.apply_rotation %x, %r heads(4) : tensor<?x64xf32>, tensor<50x16x16xf32> -> tensor<?x64xf32>
  return
}

// -----

// apply_rotation: rotations are static.
func.func @f(%x: tensor<?x50x64xf32>, %r: tensor<?x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation' op operand 'rotations' must be fully static, got 'tensor<?x16x16xf32>'}}
  %0 = pe.apply_rotation %x, %r heads(4) : tensor<?x50x64xf32>, tensor<?x16x16xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// apply_rotation: heads divide the width.
func.func @f(%x: tensor<?x50x64xf32>, %r: tensor<50x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation' op heads (6) must be positive and divide the model width 64}}
  %0 = pe.apply_rotation %x, %r heads(6) : tensor<?x50x64xf32>, tensor<50x16x16xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// apply_rotation: rotations are [T, Dh, Dh].
func.func @f(%x: tensor<?x50x64xf32>, %r: tensor<50x8x8xf32>) {
  // expected-error @+1 {{'pe.apply_rotation' op operand 'rotations' must have shape [50, 16, 16] ([T, Dh, Dh]), got 'tensor<50x8x8xf32>'}}
  %0 = pe.apply_rotation %x, %r heads(4) : tensor<?x50x64xf32>, tensor<50x8x8xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// apply_rotation: result has the type of x.
func.func @f(%x: tensor<?x50x64xf32>, %r: tensor<50x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation' op result type must be 'tensor<?x50x64xf32>', got 'tensor<?x50x16xf32>'}}
  %0 = pe.apply_rotation %x, %r heads(4) : tensor<?x50x64xf32>, tensor<50x16x16xf32> -> tensor<?x50x16xf32>
  return
}

// -----

// commutator_norm: generators are static.
func.func @f(%l: tensor<?x4x4xf32>) {
  // expected-error @+1 {{'pe.commutator_norm' op operand 'generators' must be fully static, got 'tensor<?x4x4xf32>'}}
  %0 = pe.commutator_norm %l : tensor<?x4x4xf32> -> tensor<f32>
  return
}

// -----

// commutator_norm: generators are square.
func.func @f(%l: tensor<2x4x2xf32>) {
  // expected-error @+1 {{'pe.commutator_norm' op operand 'generators' must hold square matrices [K, d, d], got 'tensor<2x4x2xf32>'}}
  %0 = pe.commutator_norm %l : tensor<2x4x2xf32> -> tensor<f32>
  return
}

// -----

// commutator_norm: at least two generators.
func.func @f(%l: tensor<1x4x4xf32>) {
  // expected-error @+1 {{'pe.commutator_norm' op needs at least 2 generators, got 1}}
  %0 = pe.commutator_norm %l : tensor<1x4x4xf32> -> tensor<f32>
  return
}

// -----

// spd_gate: x is [B, T, D].
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'pe.spd_gate' op operand 'x' must have rank 3, got 'tensor<?x64xf32>'}}
  %0 = pe.spd_gate %x, %g : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

// spd_gate: gamma is static.
func.func @f(%x: tensor<?x50x64xf32>, %g: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.spd_gate' op operand 'gamma' must be fully static, got 'tensor<?x64xf32>'}}
  %0 = pe.spd_gate %x, %g : tensor<?x50x64xf32>, tensor<?x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// spd_gate: gamma is [D] or [T, D].
func.func @f(%x: tensor<?x50x64xf32>, %g: tensor<4x64xf32>) {
  // expected-error @+1 {{'pe.spd_gate' op operand 'gamma' must have shape [64] or [50, 64] ([D] or [T, D]), got 'tensor<4x64xf32>'}}
  %0 = pe.spd_gate %x, %g : tensor<?x50x64xf32>, tensor<4x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// spd_gate: result has the type of x.
func.func @f(%x: tensor<?x50x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'pe.spd_gate' op result type must be 'tensor<?x50x64xf32>', got 'tensor<50x64xf32>'}}
  %0 = pe.spd_gate %x, %g : tensor<?x50x64xf32>, tensor<64xf32> -> tensor<50x64xf32>
  return
}

// -----

// sinusoidal: length is positive.
func.func @f() {
  // expected-error @+1 {{'pe.sinusoidal' op length must be positive, got -1}}
  %0 = pe.sinusoidal length(-1) dim(16) base(10000.0) : tensor<1x16xf32>
  return
}

// -----

// sinusoidal: dim is even.
func.func @f() {
  // expected-error @+1 {{'pe.sinusoidal' op dim must be positive and even, got 15}}
  %0 = pe.sinusoidal length(8) dim(15) base(10000.0) : tensor<8x15xf32>
  return
}

// -----

// sinusoidal: base is positive.
func.func @f() {
  // expected-error @+1 {{'pe.sinusoidal' op base must be positive, got -2}}
  %0 = pe.sinusoidal length(8) dim(16) base(-2.0) : tensor<8x16xf32>
  return
}

// -----

// sinusoidal: result is [length, dim].
func.func @f() {
  // expected-error @+1 {{'pe.sinusoidal' op result type must be 'tensor<8x16xf32>', got 'tensor<16x8xf32>'}}
  %0 = pe.sinusoidal length(8) dim(16) base(10000.0) : tensor<16x8xf32>
  return
}

// -----

// attention: the optional lse result is [B, heads, T].
func.func @f(%q: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.attention' op result 'lse' must have shape [?, 4, 50] ([B, heads, T]), got 'tensor<?x50x4xf32>'}}
  %0, %1 = pe.attention %q, %q, %q heads(4) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>, tensor<?x50x4xf32>
  return
}
