// One case per verifier rule of the backward ops of the layer and
// positional-encoding families (PELayerOps.td, PEPositionOps.td), their
// verifiers being in PELayerOps.cpp and PEPositionOps.cpp.
// RUN: string-opt %s -split-input-file -verify-diagnostics

// sum_to: only the batch of x may be dynamic.
func.func @f(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{'pe.sum_to' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<4x?xf32>'}}
  %0 = pe.sum_to %x : tensor<4x?xf32> -> tensor<f32>
  return
}

// -----

// sum_to: the result is a trailing suffix of x.
func.func @f(%x: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.sum_to' op result shape [50] must be a trailing suffix of the shape [?, 50, 64] of 'x'}}
  %0 = pe.sum_to %x : tensor<?x50x64xf32> -> tensor<50xf32>
  return
}

// -----

// sum_to: ... so it is never longer than x.
func.func @f(%x: tensor<64xf32>) {
  // expected-error @+1 {{'pe.sum_to' op result shape [2, 64] must be a trailing suffix of the shape [64] of 'x'}}
  %0 = pe.sum_to %x : tensor<64xf32> -> tensor<2x64xf32>
  return
}

// -----

// broadcast_to: only the batch of x may be dynamic.
func.func @f(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{'pe.broadcast_to' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<4x?xf32>'}}
  %0 = pe.broadcast_to %x : tensor<4x?xf32> -> tensor<2x4x?xf32>
  return
}

// -----

// broadcast_to: only the batch of the result may be dynamic.
func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.broadcast_to' op result may be dynamic only in dimension 0 (the batch), got 'tensor<2x?x64xf32>'}}
  %0 = pe.broadcast_to %x : tensor<?x64xf32> -> tensor<2x?x64xf32>
  return
}

// -----

// broadcast_to: x is a trailing suffix of the result.
func.func @f(%x: tensor<50xf32>) {
  // expected-error @+1 {{'pe.broadcast_to' op the shape [50] of 'x' must be a trailing suffix of the result shape [50, 64]}}
  %0 = pe.broadcast_to %x : tensor<50xf32> -> tensor<50x64xf32>
  return
}

// -----

// broadcast_to: like has the result shape.
func.func @f(%x: tensor<f32>, %like: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.broadcast_to' op operand 'like' must have shape [?, 50] (the result shape), got 'tensor<?x64xf32>'}}
  %0 = pe.broadcast_to %x, %like : tensor<f32>, tensor<?x64xf32> -> tensor<?x50xf32>
  return
}

// -----

// broadcast_to: a new dynamic batch needs like.
func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{'pe.broadcast_to' op a dynamic dimension 0 that 'x' does not have needs operand 'like' to give its size}}
  %0 = pe.broadcast_to %x : tensor<f32> -> tensor<?x50xf32>
  return
}

// -----

// expand_axis: only the batch of x may be dynamic.
func.func @f(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{'pe.expand_axis' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<4x?xf32>'}}
  %0 = pe.expand_axis %x axis(1) size(2) : tensor<4x?xf32> -> tensor<4x2x?xf32>
  return
}

// -----

// expand_axis: axis is in [0, rank].
func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.expand_axis' op axis 3 is out of range [0, 2] for operand 'x' of rank 2}}
  %0 = pe.expand_axis %x axis(3) size(2) : tensor<?x64xf32> -> tensor<?x64x2xf32>
  return
}

// -----

func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.expand_axis' op axis -1 is out of range [0, 2] for operand 'x' of rank 2}}
  %0 = pe.expand_axis %x axis(-1) size(2) : tensor<?x64xf32> -> tensor<?x64x2xf32>
  return
}

// -----

// expand_axis: size is positive.
func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.expand_axis' op size must be positive, got 0}}
  %0 = pe.expand_axis %x axis(1) size(0) : tensor<?x64xf32> -> tensor<?x0x64xf32>
  return
}

// -----

// expand_axis: the dynamic batch stays in dimension 0.
func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.expand_axis' op axis 0 would move the dynamic batch dimension of 'x' out of dimension 0}}
  %0 = pe.expand_axis %x axis(0) size(2) : tensor<?x64xf32> -> tensor<2x?x64xf32>
  return
}

// -----

// expand_axis: result shape.
func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.expand_axis' op result 'result' must have shape [?, 50, 64] (the shape of 'x' with 50 inserted at axis 1), got 'tensor<?x64x50xf32>'}}
  %0 = pe.expand_axis %x axis(1) size(50) : tensor<?x64xf32> -> tensor<?x64x50xf32>
  return
}

// -----

// mean_grad: only the batch of x may be dynamic.
func.func @f(%x: tensor<4x?xf32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.mean_grad' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<4x?xf32>'}}
  %0 = pe.mean_grad %x, %dy : tensor<4x?xf32>, tensor<f32> -> tensor<4x?xf32>
  return
}

// -----

// mean_grad: without axis, dy is a scalar.
func.func @f(%x: tensor<?x64xf32>, %dy: tensor<64xf32>) {
  // expected-error @+1 {{'pe.mean_grad' op operand 'dy' must have shape [] (a scalar: the mean of every element), got 'tensor<64xf32>'}}
  %0 = pe.mean_grad %x, %dy : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

// mean_grad: axis is in [0, rank).
func.func @f(%x: tensor<?x64xf32>, %dy: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.mean_grad' op axis 2 is out of range for operand 'x' of rank 2}}
  %0 = pe.mean_grad %x, %dy axis(2) : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @f(%x: tensor<?x64xf32>, %dy: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.mean_grad' op axis -1 is out of range for operand 'x' of rank 2}}
  %0 = pe.mean_grad %x, %dy axis(-1) : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return
}

// -----

// mean_grad: dy has the shape of x without axis.
func.func @f(%x: tensor<?x50x64xf32>, %dy: tensor<?x50xf32>) {
  // expected-error @+1 {{'pe.mean_grad' op operand 'dy' must have shape [?, 64] (the shape of 'x' without axis 1), got 'tensor<?x50xf32>'}}
  %0 = pe.mean_grad %x, %dy axis(1) : tensor<?x50x64xf32>, tensor<?x50xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// mean_grad: over the batch, dy has no batch dimension.
func.func @f(%x: tensor<?x64xf32>, %dy: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.mean_grad' op operand 'dy' must have shape [64] (the shape of 'x' without axis 0), got 'tensor<?x64xf32>'}}
  %0 = pe.mean_grad %x, %dy axis(0) : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return
}

// -----

// mean_grad: dx has the shape of x.
func.func @f(%x: tensor<?x64xf32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.mean_grad' op result 'dx' must have shape [?, 64] (the shape of 'x'), got 'tensor<64xf32>'}}
  %0 = pe.mean_grad %x, %dy : tensor<?x64xf32>, tensor<f32> -> tensor<64xf32>
  return
}

// -----

// linear_grad_input: dy must have a rank.
func.func @f(%dy: tensor<f32>, %w: tensor<4x4xf32>) {
  // expected-error @+1 {{'pe.linear_grad_input' op operand 'dy' must have rank at least 1, got 'tensor<f32>'}}
  %0 = pe.linear_grad_input %dy, %w : tensor<f32>, tensor<4x4xf32> -> tensor<4xf32>
  return
}

// -----

// linear_grad_input: only the batch of dy may be dynamic.
func.func @f(%dy: tensor<?x?x8xf32>, %w: tensor<64x8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_input' op operand 'dy' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?x8xf32>'}}
  %0 = pe.linear_grad_input %dy, %w : tensor<?x?x8xf32>, tensor<64x8xf32> -> tensor<?x?x64xf32>
  return
}

// -----

// linear_grad_input: w is a matrix.
func.func @f(%dy: tensor<?x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_input' op operand 'w' must have rank 2, got 'tensor<8xf32>'}}
  %0 = pe.linear_grad_input %dy, %w : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  return
}

// -----

// linear_grad_input: w is static.
func.func @f(%dy: tensor<?x8xf32>, %w: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_input' op operand 'w' must be fully static, got 'tensor<?x8xf32>'}}
  %0 = pe.linear_grad_input %dy, %w : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
  return
}

// -----

// linear_grad_input: the columns of w match the last dimension of dy.
func.func @f(%dy: tensor<?x8xf32>, %w: tensor<64x4xf32>) {
  // expected-error @+1 {{'pe.linear_grad_input' op operand 'w' must have 8 columns (the last dimension of 'dy'), got 'tensor<64x4xf32>'}}
  %0 = pe.linear_grad_input %dy, %w : tensor<?x8xf32>, tensor<64x4xf32> -> tensor<?x64xf32>
  return
}

// -----

// linear_grad_input: dx is [..., I].
func.func @f(%dy: tensor<?x8xf32>, %w: tensor<64x8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_input' op result 'dx' must have shape [?, 64] ([..., I]), got 'tensor<?x8xf32>'}}
  %0 = pe.linear_grad_input %dy, %w : tensor<?x8xf32>, tensor<64x8xf32> -> tensor<?x8xf32>
  return
}

// -----

// linear_grad_weight: x must have a rank.
func.func @f(%x: tensor<f32>, %dy: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_weight' op operand 'x' must have rank at least 1, got 'tensor<f32>'}}
  %0 = pe.linear_grad_weight %x, %dy : tensor<f32>, tensor<?x8xf32> -> tensor<1x8xf32>
  return
}

// -----

// linear_grad_weight: only the batch of dy may be dynamic.
func.func @f(%x: tensor<?x4x64xf32>, %dy: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_weight' op operand 'dy' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?x8xf32>'}}
  %0 = pe.linear_grad_weight %x, %dy : tensor<?x4x64xf32>, tensor<?x?x8xf32> -> tensor<64x8xf32>
  return
}

// -----

// linear_grad_weight: I is static (rank-1 x has no batch).
func.func @f(%x: tensor<?xf32>, %dy: tensor<8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_weight' op the last dimension of 'x' must be static, got 'tensor<?xf32>'}}
  %0 = pe.linear_grad_weight %x, %dy : tensor<?xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

// linear_grad_weight: O is static.
func.func @f(%x: tensor<64xf32>, %dy: tensor<?xf32>) {
  // expected-error @+1 {{'pe.linear_grad_weight' op the last dimension of 'dy' must be static, got 'tensor<?xf32>'}}
  %0 = pe.linear_grad_weight %x, %dy : tensor<64xf32>, tensor<?xf32> -> tensor<64x8xf32>
  return
}

// -----

// linear_grad_weight: dy has the leading dimensions of x.
func.func @f(%x: tensor<?x50x64xf32>, %dy: tensor<?x49x8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_weight' op operand 'dy' must have shape [?, 50, 8] (the leading dimensions of 'x', then O), got 'tensor<?x49x8xf32>'}}
  %0 = pe.linear_grad_weight %x, %dy : tensor<?x50x64xf32>, tensor<?x49x8xf32> -> tensor<64x8xf32>
  return
}

// -----

// linear_grad_weight: dw is [I, O].
func.func @f(%x: tensor<?x64xf32>, %dy: tensor<?x8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_weight' op result 'dw' must have shape [64, 8] ([I, O]), got 'tensor<8x64xf32>'}}
  %0 = pe.linear_grad_weight %x, %dy : tensor<?x64xf32>, tensor<?x8xf32> -> tensor<8x64xf32>
  return
}

// -----

// layer_norm_grad: x must have a rank.
func.func @f(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad' op operand 'x' must have rank at least 1, got 'tensor<f32>'}}
  %0:3 = pe.layer_norm_grad %x, %g, %x : tensor<f32>, tensor<1xf32>, tensor<f32> -> (tensor<f32>, tensor<1xf32>, tensor<1xf32>)
  return
}

// -----

// layer_norm_grad: gamma is a vector.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<1x64xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad' op operand 'gamma' must have rank 1, got 'tensor<1x64xf32>'}}
  %0:3 = pe.layer_norm_grad %x, %g, %x : tensor<?x64xf32>, tensor<1x64xf32>, tensor<?x64xf32> -> (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

// layer_norm_grad: gamma is static.
func.func @f(%x: tensor<?xf32>, %g: tensor<?xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad' op operand 'gamma' must be fully static, got 'tensor<?xf32>'}}
  %0:3 = pe.layer_norm_grad %x, %g, %x : tensor<?xf32>, tensor<?xf32>, tensor<?xf32> -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>)
  return
}

// -----

// layer_norm_grad: gamma has D entries.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<32xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad' op operand 'gamma' must have shape [64] ([D]), got 'tensor<32xf32>'}}
  %0:3 = pe.layer_norm_grad %x, %g, %x : tensor<?x64xf32>, tensor<32xf32>, tensor<?x64xf32> -> (tensor<?x64xf32>, tensor<32xf32>, tensor<32xf32>)
  return
}

// -----

// layer_norm_grad: epsilon is positive.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad' op epsilon must be positive, got -1}}
  %0:3 = pe.layer_norm_grad %x, %g, %x epsilon(-1.0) : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32> -> (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

// layer_norm_grad: dy has the shape of x.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %dy: tensor<2x64xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad' op operand 'dy' must have shape [?, 64] (the shape of 'x'), got 'tensor<2x64xf32>'}}
  %0:3 = pe.layer_norm_grad %x, %g, %dy : tensor<?x64xf32>, tensor<64xf32>, tensor<2x64xf32> -> (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

// layer_norm_grad: dx has the shape of x.
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad' op result 'dx' must have shape [?, 64] (the shape of 'x'), got 'tensor<2x64xf32>'}}
  %0:3 = pe.layer_norm_grad %x, %g, %x : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32> -> (tensor<2x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

// layer_norm_grad: dgamma is [D].
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad' op result 'dgamma' must have shape [64] ([D]), got 'tensor<1x64xf32>'}}
  %0:3 = pe.layer_norm_grad %x, %g, %x : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32> -> (tensor<?x64xf32>, tensor<1x64xf32>, tensor<64xf32>)
  return
}

// -----

// layer_norm_grad: dbeta is [D].
func.func @f(%x: tensor<?x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad' op result 'dbeta' must have shape [64] ([D]), got 'tensor<32xf32>'}}
  %0:3 = pe.layer_norm_grad %x, %g, %x : tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32> -> (tensor<?x64xf32>, tensor<64xf32>, tensor<32xf32>)
  return
}

// -----

// gelu_grad: only the batch of x may be dynamic.
func.func @f(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{'pe.gelu_grad' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<4x?xf32>'}}
  %0 = pe.gelu_grad %x, %x : tensor<4x?xf32>, tensor<4x?xf32> -> tensor<4x?xf32>
  return
}

// -----

// gelu_grad: dy has the shape of x.
func.func @f(%x: tensor<?x64xf32>, %dy: tensor<?x32xf32>) {
  // expected-error @+1 {{'pe.gelu_grad' op operand 'dy' must have shape [?, 64] (the shape of 'x'), got 'tensor<?x32xf32>'}}
  %0 = pe.gelu_grad %x, %dy approximate(true) : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<?x64xf32>
  return
}

// -----

// gelu_grad: dx has the shape of x.
func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.gelu_grad' op result 'dx' must have shape [?, 64] (the shape of 'x'), got 'tensor<64xf32>'}}
  %0 = pe.gelu_grad %x, %x : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<64xf32>
  return
}

// -----

// relu_grad: only the batch of x may be dynamic.
func.func @f(%x: tensor<?x?xf32>) {
  // expected-error @+1 {{'pe.relu_grad' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?xf32>'}}
  %0 = pe.relu_grad %x, %x : tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?x?xf32>
  return
}

// -----

// relu_grad: dy has the shape of x.
func.func @f(%x: tensor<?x64xf32>, %dy: tensor<64xf32>) {
  // expected-error @+1 {{'pe.relu_grad' op operand 'dy' must have shape [?, 64] (the shape of 'x'), got 'tensor<64xf32>'}}
  %0 = pe.relu_grad %x, %dy : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

// relu_grad: dx has the shape of x.
func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.relu_grad' op result 'dx' must have shape [?, 64] (the shape of 'x'), got 'tensor<?x65xf32>'}}
  %0 = pe.relu_grad %x, %x : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x65xf32>
  return
}

// -----

// patch_embed_grad: the image is [B, C, H, W].
func.func @f(%img: tensor<?x28x28xf32>, %dy: tensor<?x49x64xf32>) {
  // expected-error @+1 {{'pe.patch_embed_grad' op operand 'image' must have rank 4, got 'tensor<?x28x28xf32>'}}
  %0:2 = pe.patch_embed_grad %img, %dy patch(4) : tensor<?x28x28xf32>, tensor<?x49x64xf32> -> (tensor<16x64xf32>, tensor<64xf32>)
  return
}

// -----

// patch_embed_grad: dy is [B, N, D].
func.func @f(%img: tensor<?x1x28x28xf32>, %dy: tensor<?x3136xf32>) {
  // expected-error @+1 {{'pe.patch_embed_grad' op operand 'dy' must have rank 3, got 'tensor<?x3136xf32>'}}
  %0:2 = pe.patch_embed_grad %img, %dy patch(4) : tensor<?x1x28x28xf32>, tensor<?x3136xf32> -> (tensor<16x64xf32>, tensor<64xf32>)
  return
}

// -----

// patch_embed_grad: patch is positive.
func.func @f(%img: tensor<?x1x28x28xf32>, %dy: tensor<?x49x64xf32>) {
  // expected-error @+1 {{'pe.patch_embed_grad' op patch must be positive, got 0}}
  %0:2 = pe.patch_embed_grad %img, %dy patch(0) : tensor<?x1x28x28xf32>, tensor<?x49x64xf32> -> (tensor<16x64xf32>, tensor<64xf32>)
  return
}

// -----

// patch_embed_grad: patch divides the image.
func.func @f(%img: tensor<?x1x28x28xf32>, %dy: tensor<?x25x64xf32>) {
  // expected-error @+1 {{'pe.patch_embed_grad' op patch 5 must divide the image height 28 and width 28}}
  %0:2 = pe.patch_embed_grad %img, %dy patch(5) : tensor<?x1x28x28xf32>, tensor<?x25x64xf32> -> (tensor<25x64xf32>, tensor<64xf32>)
  return
}

// -----

// patch_embed_grad: dy has one row per patch.
func.func @f(%img: tensor<?x1x28x28xf32>, %dy: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.patch_embed_grad' op operand 'dy' must have shape [?, 49, 64] ([B, (H/p)*(W/p), D]), got 'tensor<?x50x64xf32>'}}
  %0:2 = pe.patch_embed_grad %img, %dy patch(4) : tensor<?x1x28x28xf32>, tensor<?x50x64xf32> -> (tensor<16x64xf32>, tensor<64xf32>)
  return
}

// -----

// patch_embed_grad: dw is [C*p*p, D].
func.func @f(%img: tensor<?x3x28x28xf32>, %dy: tensor<?x49x64xf32>) {
  // expected-error @+1 {{'pe.patch_embed_grad' op result 'dw' must have shape [48, 64] ([C*p*p, D]), got 'tensor<16x64xf32>'}}
  %0:2 = pe.patch_embed_grad %img, %dy patch(4) : tensor<?x3x28x28xf32>, tensor<?x49x64xf32> -> (tensor<16x64xf32>, tensor<64xf32>)
  return
}

// -----

// patch_embed_grad: db is [D].
func.func @f(%img: tensor<?x1x28x28xf32>, %dy: tensor<?x49x64xf32>) {
  // expected-error @+1 {{'pe.patch_embed_grad' op result 'db' must have shape [64] ([D]), got 'tensor<16xf32>'}}
  %0:2 = pe.patch_embed_grad %img, %dy patch(4) : tensor<?x1x28x28xf32>, tensor<?x49x64xf32> -> (tensor<16x64xf32>, tensor<16xf32>)
  return
}

// -----

// token_embed_grad: ids is [B, T].
func.func @f(%ids: tensor<?xi32>, %dy: tensor<?x64x128xf32>) {
  // expected-error @+1 {{'pe.token_embed_grad' op operand 'ids' must have rank 2, got 'tensor<?xi32>'}}
  %0 = pe.token_embed_grad %ids, %dy : tensor<?xi32>, tensor<?x64x128xf32> -> tensor<256x128xf32>
  return
}

// -----

// token_embed_grad: only the batch of dy may be dynamic.
func.func @f(%ids: tensor<?x64xi32>, %dy: tensor<?x64x?xf32>) {
  // expected-error @+1 {{'pe.token_embed_grad' op operand 'dy' may be dynamic only in dimension 0 (the batch), got 'tensor<?x64x?xf32>'}}
  %0 = pe.token_embed_grad %ids, %dy : tensor<?x64xi32>, tensor<?x64x?xf32> -> tensor<256x128xf32>
  return
}

// -----

// token_embed_grad: dy has the batch and tokens of ids.
func.func @f(%ids: tensor<?x64xi32>, %dy: tensor<?x32x128xf32>) {
  // expected-error @+1 {{'pe.token_embed_grad' op operand 'dy' must have shape [?, 64, 128] ([B, T, D], B and T those of 'ids'), got 'tensor<?x32x128xf32>'}}
  %0 = pe.token_embed_grad %ids, %dy : tensor<?x64xi32>, tensor<?x32x128xf32> -> tensor<256x128xf32>
  return
}

// -----

// token_embed_grad: the result is a static table.
func.func @f(%ids: tensor<?x64xi32>, %dy: tensor<?x64x128xf32>) {
  // expected-error @+1 {{'pe.token_embed_grad' op result 'dtable' must be a static [V, D] table, got 'tensor<?x128xf32>'}}
  %0 = pe.token_embed_grad %ids, %dy : tensor<?x64xi32>, tensor<?x64x128xf32> -> tensor<?x128xf32>
  return
}

// -----

// token_embed_grad: the table has D columns.
func.func @f(%ids: tensor<?x64xi32>, %dy: tensor<?x64x128xf32>) {
  // expected-error @+1 {{'pe.token_embed_grad' op result 'dtable' must have shape [256, 128] ([V, D]), got 'tensor<256x64xf32>'}}
  %0 = pe.token_embed_grad %ids, %dy : tensor<?x64xi32>, tensor<?x64x128xf32> -> tensor<256x64xf32>
  return
}

// -----

// class_token_grad: dy is [B, N+1, D].
func.func @f(%dy: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.class_token_grad' op operand 'dy' must have rank 3, got 'tensor<?x64xf32>'}}
  %0:2 = pe.class_token_grad %dy : tensor<?x64xf32> -> (tensor<?x64xf32>, tensor<64xf32>)
  return
}

// -----

// class_token_grad: dy holds the class token.
func.func @f(%dy: tensor<?x0x64xf32>) {
  // expected-error @+1 {{'pe.class_token_grad' op operand 'dy' must have at least one token (the class token), got 'tensor<?x0x64xf32>'}}
  %0:2 = pe.class_token_grad %dy : tensor<?x0x64xf32> -> (tensor<?x0x64xf32>, tensor<64xf32>)
  return
}

// -----

// class_token_grad: dx drops the class token.
func.func @f(%dy: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.class_token_grad' op result 'dx' must have shape [?, 49, 64] ([B, N, D]), got 'tensor<?x50x64xf32>'}}
  %0:2 = pe.class_token_grad %dy : tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>)
  return
}

// -----

// class_token_grad: dcls is [D].
func.func @f(%dy: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.class_token_grad' op result 'dcls' must have shape [64] ([D]), got 'tensor<1x64xf32>'}}
  %0:2 = pe.class_token_grad %dy : tensor<?x50x64xf32> -> (tensor<?x49x64xf32>, tensor<1x64xf32>)
  return
}

// -----

// select_token_grad: dy is [B, D].
func.func @f(%dy: tensor<?x50x64xf32>) {
  // expected-error @+1 {{'pe.select_token_grad' op operand 'dy' must have rank 2, got 'tensor<?x50x64xf32>'}}
  %0 = pe.select_token_grad %dy index(0) : tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// select_token_grad: the result gives a static token count.
func.func @f(%dy: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.select_token_grad' op result 'dx' must be [B, T, D] with static T and D, got 'tensor<?x?x64xf32>'}}
  %0 = pe.select_token_grad %dy index(0) : tensor<?x64xf32> -> tensor<?x?x64xf32>
  return
}

// -----

// select_token_grad: the index is one of the tokens.
func.func @f(%dy: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.select_token_grad' op index 50 is out of range for 50 tokens}}
  %0 = pe.select_token_grad %dy index(50) : tensor<?x64xf32> -> tensor<?x50x64xf32>
  return
}

// -----

// select_token_grad: the result has the batch and width of dy.
func.func @f(%dy: tensor<?x64xf32>) {
  // expected-error @+1 {{'pe.select_token_grad' op result 'dx' must have shape [?, 50, 64] ([B, T, D]), got 'tensor<?x50x32xf32>'}}
  %0 = pe.select_token_grad %dy index(0) : tensor<?x64xf32> -> tensor<?x50x32xf32>
  return
}

// -----

// attention_grad: q is [B, T, D].
func.func @f(%q: tensor<?x64xf32>, %lse: tensor<?x1x1xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op operand 'q' must have rank 3, got 'tensor<?x64xf32>'}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(1) scale(1.0) mask(none) : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x1x1xf32>, tensor<?x64xf32> -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>)
  return
}

// -----

// attention_grad: q, k and v share one type.
func.func @f(%q: tensor<?x8x64xf32>, %k: tensor<?x8x64xf32>, %v: tensor<?x8x32xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op operands 'q', 'k' and 'v' must have the same type, got 'tensor<?x8x64xf32>', 'tensor<?x8x64xf32>', 'tensor<?x8x32xf32>'}}
  %0:3 = pe.attention_grad %q, %k, %v, %q, %lse, %q heads(1) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x32xf32>, tensor<?x8x64xf32>, tensor<?x1x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// attention_grad: heads divide the width.
func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x3x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op heads (3) must be positive and divide the model width 64}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(3) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x3x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// attention_grad: rel is static.
func.func @f(%q: tensor<?x8x64xf32>, %rel: tensor<?x8x16x16xf32>, %lse: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op operand 'rel' must be fully static, got 'tensor<?x8x16x16xf32>'}}
  %0:4 = pe.attention_grad %q, %q, %q, %q, %lse, %q, %rel heads(4) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x4x8xf32>, tensor<?x8x64xf32>, tensor<?x8x16x16xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x16x16xf32>)
  return
}

// -----

// attention_grad: rel is [T, T, Dh, Dh].
func.func @f(%q: tensor<?x8x64xf32>, %rel: tensor<8x8x64x64xf32>, %lse: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op operand 'rel' must have shape [8, 8, 16, 16] ([T, T, Dh, Dh]), got 'tensor<8x8x64x64xf32>'}}
  %0:4 = pe.attention_grad %q, %q, %q, %q, %lse, %q, %rel heads(4) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x4x8xf32>, tensor<?x8x64xf32>, tensor<8x8x64x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<8x8x64x64xf32>)
  return
}

// -----

// attention_grad: scale is positive.
func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op scale must be positive, got 0}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(1) scale(0.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x1x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// attention_grad: the skip mask requires skip_base ...
func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op mask 'skip' requires skip_base}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(1) scale(1.0) mask(skip) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x1x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// ... and no other mask takes it ...
func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op skip_base applies only to mask 'skip'}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(1) scale(1.0) mask(causal) skip_base(1) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x1x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// ... which is non-negative.
func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op skip_base must be non-negative, got -1}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(1) scale(1.0) mask(skip) skip_base(-1) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x1x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// attention_grad: dy has the shape of q.
func.func @f(%q: tensor<?x8x64xf32>, %dy: tensor<?x8x32xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op operand 'dy' must have shape [?, 8, 64] (the shape of 'q'), got 'tensor<?x8x32xf32>'}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %dy heads(1) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x1x8xf32>, tensor<?x8x32xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// attention_grad: y is the forward's result, of the shape of q ...
func.func @f(%q: tensor<?x8x64xf32>, %y: tensor<?x7x64xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op operand 'y' must have shape [?, 8, 64] (the shape of 'q'), got 'tensor<?x7x64xf32>'}}
  %0:3 = pe.attention_grad %q, %q, %q, %y, %lse, %q heads(1) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x7x64xf32>, tensor<?x1x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// ... and lse its log-sum-exp, [B, heads, T].
func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x8x2xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op operand 'lse' must have shape [?, 2, 8] ([B, heads, T]), got 'tensor<?x8x2xf32>'}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(2) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x2xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// attention_grad: rel gets a gradient drel ...
func.func @f(%q: tensor<?x8x64xf32>, %rel: tensor<8x8x16x16xf32>, %lse: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op operand 'rel' needs a fourth result 'drel'}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q, %rel heads(4) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x4x8xf32>, tensor<?x8x64xf32>, tensor<8x8x16x16xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

// ... and there is no drel without rel.
func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op result 'drel' needs operand 'rel'}}
  %0:4 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(4) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x4x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<8x8x16x16xf32>)
  return
}

// -----

// attention_grad: dq, dk and dv have the shape of q.
func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op result 'dq' must have shape [?, 8, 64] (the shape of 'q'), got 'tensor<2x8x64xf32>'}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(1) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x1x8xf32>, tensor<?x8x64xf32> -> (tensor<2x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>)
  return
}

// -----

func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op result 'dk' must have shape [?, 8, 64] (the shape of 'k'), got 'tensor<?x8x32xf32>'}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(1) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x1x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x32xf32>, tensor<?x8x64xf32>)
  return
}

// -----

func.func @f(%q: tensor<?x8x64xf32>, %lse: tensor<?x1x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op result 'dv' must have shape [?, 8, 64] (the shape of 'v'), got 'tensor<?x7x64xf32>'}}
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %q heads(1) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x1x8xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x7x64xf32>)
  return
}

// -----

// attention_grad: drel has the shape of rel.
func.func @f(%q: tensor<?x8x64xf32>, %rel: tensor<8x8x16x16xf32>, %lse: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'pe.attention_grad' op result 'drel' must have shape [8, 8, 16, 16] (the shape of 'rel'), got 'tensor<8x16x16xf32>'}}
  %0:4 = pe.attention_grad %q, %q, %q, %q, %lse, %q, %rel heads(4) scale(1.0) mask(none) : tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x4x8xf32>, tensor<?x8x64xf32>, tensor<8x8x16x16xf32> -> (tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<?x8x64xf32>, tensor<8x16x16xf32>)
  return
}

// -----

// cross_entropy_grad: logits must have a rank.
func.func @f(%logits: tensor<f32>, %labels: tensor<i32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.cross_entropy_grad' op operand 'logits' must have rank at least 1, got 'tensor<f32>'}}
  %0 = pe.cross_entropy_grad %logits, %labels, %dy : tensor<f32>, tensor<i32>, tensor<f32> -> tensor<f32>
  return
}

// -----

// cross_entropy_grad: only the batch of labels may be dynamic.
func.func @f(%logits: tensor<?x8x10xf32>, %labels: tensor<?x?xi32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.cross_entropy_grad' op operand 'labels' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?xi32>'}}
  %0 = pe.cross_entropy_grad %logits, %labels, %dy : tensor<?x8x10xf32>, tensor<?x?xi32>, tensor<f32> -> tensor<?x8x10xf32>
  return
}

// -----

// cross_entropy_grad: the class dimension is static.
func.func @f(%logits: tensor<?xf32>, %labels: tensor<i32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.cross_entropy_grad' op the class dimension of 'logits' must be static, got 'tensor<?xf32>'}}
  %0 = pe.cross_entropy_grad %logits, %labels, %dy : tensor<?xf32>, tensor<i32>, tensor<f32> -> tensor<?xf32>
  return
}

// -----

// cross_entropy_grad: labels have the shape of logits without C.
func.func @f(%logits: tensor<?x10xf32>, %labels: tensor<?x10xi32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.cross_entropy_grad' op operand 'labels' must have shape [?] (the shape of 'logits' without its last dimension), got 'tensor<?x10xi32>'}}
  %0 = pe.cross_entropy_grad %logits, %labels, %dy : tensor<?x10xf32>, tensor<?x10xi32>, tensor<f32> -> tensor<?x10xf32>
  return
}

// -----

// cross_entropy_grad: dy is the scalar gradient of the loss (an ODS rule).
func.func @f(%logits: tensor<?x10xf32>, %labels: tensor<?xi32>, %dy: tensor<1xf32>) {
  // expected-error @+1 {{'pe.cross_entropy_grad' op operand #2 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %0 = pe.cross_entropy_grad %logits, %labels, %dy : tensor<?x10xf32>, tensor<?xi32>, tensor<1xf32> -> tensor<?x10xf32>
  return
}

// -----

// cross_entropy_grad: dlogits has the shape of logits.
func.func @f(%logits: tensor<?x10xf32>, %labels: tensor<?xi32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.cross_entropy_grad' op result 'dlogits' must have shape [?, 10] (the shape of 'logits'), got 'tensor<?x9xf32>'}}
  %0 = pe.cross_entropy_grad %logits, %labels, %dy : tensor<?x10xf32>, tensor<?xi32>, tensor<f32> -> tensor<?x9xf32>
  return
}

// -----

// rope_grad_freqs: x is [B, T, D].
func.func @f(%x: tensor<?x64xf32>, %pos: tensor<64x1xf32>, %f: tensor<32x1xf32>) {
  // expected-error @+1 {{'pe.rope_grad_freqs' op operand 'x' must have rank 3, got 'tensor<?x64xf32>'}}
  %0 = pe.rope_grad_freqs %x, %pos, %f, %x : tensor<?x64xf32>, tensor<64x1xf32>, tensor<32x1xf32>, tensor<?x64xf32> -> tensor<32x1xf32>
  return
}

// -----

// rope_grad_freqs: positions are static.
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<?x1xf32>, %f: tensor<32x1xf32>) {
  // expected-error @+1 {{'pe.rope_grad_freqs' op operand 'pos' must be fully static, got 'tensor<?x1xf32>'}}
  %0 = pe.rope_grad_freqs %x, %pos, %f, %x : tensor<?x8x64xf32>, tensor<?x1xf32>, tensor<32x1xf32>, tensor<?x8x64xf32> -> tensor<32x1xf32>
  return
}

// -----

// rope_grad_freqs: D is even.
func.func @f(%x: tensor<?x8x63xf32>, %pos: tensor<8x1xf32>, %f: tensor<31x1xf32>) {
  // expected-error @+1 {{'pe.rope_grad_freqs' op the last dimension of 'x' must be even (interleaved pairs), got 63}}
  %0 = pe.rope_grad_freqs %x, %pos, %f, %x : tensor<?x8x63xf32>, tensor<8x1xf32>, tensor<31x1xf32>, tensor<?x8x63xf32> -> tensor<31x1xf32>
  return
}

// -----

// rope_grad_freqs: one position per token.
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<9x1xf32>, %f: tensor<32x1xf32>) {
  // expected-error @+1 {{'pe.rope_grad_freqs' op operand 'pos' must have 8 rows (the tokens of 'x'), got 'tensor<9x1xf32>'}}
  %0 = pe.rope_grad_freqs %x, %pos, %f, %x : tensor<?x8x64xf32>, tensor<9x1xf32>, tensor<32x1xf32>, tensor<?x8x64xf32> -> tensor<32x1xf32>
  return
}

// -----

// rope_grad_freqs: 1 or 2 position axes.
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<8x3xf32>, %f: tensor<32x3xf32>) {
  // expected-error @+1 {{'pe.rope_grad_freqs' op operand 'pos' must have 1 or 2 axes, got 3}}
  %0 = pe.rope_grad_freqs %x, %pos, %f, %x : tensor<?x8x64xf32>, tensor<8x3xf32>, tensor<32x3xf32>, tensor<?x8x64xf32> -> tensor<32x3xf32>
  return
}

// -----

// rope_grad_freqs: freqs is a static table.
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<8x1xf32>, %f: tensor<32xf32>) {
  // expected-error @+1 {{'pe.rope_grad_freqs' op operand 'freqs' must have rank 2, got 'tensor<32xf32>'}}
  %0 = pe.rope_grad_freqs %x, %pos, %f, %x : tensor<?x8x64xf32>, tensor<8x1xf32>, tensor<32xf32>, tensor<?x8x64xf32> -> tensor<32x1xf32>
  return
}

// -----

// rope_grad_freqs: freqs is [D/2, A].
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<8x2xf32>, %f: tensor<32x1xf32>) {
  // expected-error @+1 {{'pe.rope_grad_freqs' op operand 'freqs' must have shape [32, 2] ([D/2, A]), got 'tensor<32x1xf32>'}}
  %0 = pe.rope_grad_freqs %x, %pos, %f, %x : tensor<?x8x64xf32>, tensor<8x2xf32>, tensor<32x1xf32>, tensor<?x8x64xf32> -> tensor<32x1xf32>
  return
}

// -----

// rope_grad_freqs: dy has the shape of x.
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<8x1xf32>, %f: tensor<32x1xf32>, %dy: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'pe.rope_grad_freqs' op operand 'dy' must have shape [?, 8, 64] (the shape of 'x'), got 'tensor<2x8x64xf32>'}}
  %0 = pe.rope_grad_freqs %x, %pos, %f, %dy : tensor<?x8x64xf32>, tensor<8x1xf32>, tensor<32x1xf32>, tensor<2x8x64xf32> -> tensor<32x1xf32>
  return
}

// -----

// rope_grad_freqs: dfreqs has the shape of freqs.
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<8x1xf32>, %f: tensor<32x1xf32>) {
  // expected-error @+1 {{'pe.rope_grad_freqs' op result 'dfreqs' must have shape [32, 1] (the shape of 'freqs'), got 'tensor<32xf32>'}}
  %0 = pe.rope_grad_freqs %x, %pos, %f, %x : tensor<?x8x64xf32>, tensor<8x1xf32>, tensor<32x1xf32>, tensor<?x8x64xf32> -> tensor<32xf32>
  return
}

// -----

// householder_grad_freqs: only the batch of x may be dynamic.
func.func @f(%x: tensor<?x?x64xf32>, %pos: tensor<8x2xf32>, %f: tensor<32x2xf32>) {
  // expected-error @+1 {{'pe.householder_grad_freqs' op operand 'x' may be dynamic only in dimension 0 (the batch), got 'tensor<?x?x64xf32>'}}
  %0:2 = pe.householder_grad_freqs %x, %pos, %f, %f, %x : tensor<?x?x64xf32>, tensor<8x2xf32>, tensor<32x2xf32>, tensor<32x2xf32>, tensor<?x?x64xf32> -> (tensor<32x2xf32>, tensor<32x2xf32>)
  return
}

// -----

// householder_grad_freqs: f2 is [D/2, A] too.
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<8x2xf32>, %f1: tensor<32x2xf32>, %f2: tensor<16x2xf32>) {
  // expected-error @+1 {{'pe.householder_grad_freqs' op operand 'f2' must have shape [32, 2] ([D/2, A]), got 'tensor<16x2xf32>'}}
  %0:2 = pe.householder_grad_freqs %x, %pos, %f1, %f2, %x : tensor<?x8x64xf32>, tensor<8x2xf32>, tensor<32x2xf32>, tensor<16x2xf32>, tensor<?x8x64xf32> -> (tensor<32x2xf32>, tensor<16x2xf32>)
  return
}

// -----

// householder_grad_freqs: dy has the shape of x.
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<8x2xf32>, %f: tensor<32x2xf32>, %dy: tensor<?x8x32xf32>) {
  // expected-error @+1 {{'pe.householder_grad_freqs' op operand 'dy' must have shape [?, 8, 64] (the shape of 'x'), got 'tensor<?x8x32xf32>'}}
  %0:2 = pe.householder_grad_freqs %x, %pos, %f, %f, %dy : tensor<?x8x64xf32>, tensor<8x2xf32>, tensor<32x2xf32>, tensor<32x2xf32>, tensor<?x8x32xf32> -> (tensor<32x2xf32>, tensor<32x2xf32>)
  return
}

// -----

// householder_grad_freqs: df1 has the shape of f1 ...
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<8x2xf32>, %f: tensor<32x2xf32>) {
  // expected-error @+1 {{'pe.householder_grad_freqs' op result 'df1' must have shape [32, 2] (the shape of 'f1'), got 'tensor<32x1xf32>'}}
  %0:2 = pe.householder_grad_freqs %x, %pos, %f, %f, %x : tensor<?x8x64xf32>, tensor<8x2xf32>, tensor<32x2xf32>, tensor<32x2xf32>, tensor<?x8x64xf32> -> (tensor<32x1xf32>, tensor<32x2xf32>)
  return
}

// -----

// ... and df2 that of f2.
func.func @f(%x: tensor<?x8x64xf32>, %pos: tensor<8x2xf32>, %f: tensor<32x2xf32>) {
  // expected-error @+1 {{'pe.householder_grad_freqs' op result 'df2' must have shape [32, 2] (the shape of 'f2'), got 'tensor<2x32xf32>'}}
  %0:2 = pe.householder_grad_freqs %x, %pos, %f, %f, %x : tensor<?x8x64xf32>, tensor<8x2xf32>, tensor<32x2xf32>, tensor<32x2xf32>, tensor<?x8x64xf32> -> (tensor<32x2xf32>, tensor<2x32xf32>)
  return
}

// -----

// skew_grad: dy holds matrices.
func.func @f(%dy: tensor<16xf32>) {
  // expected-error @+1 {{'pe.skew_grad' op operand 'dy' must have rank at least 2, got 'tensor<16xf32>'}}
  %0 = pe.skew_grad %dy dim(4) : tensor<16xf32> -> tensor<6xf32>
  return
}

// -----

// skew_grad: dy is static.
func.func @f(%dy: tensor<?x4x4xf32>) {
  // expected-error @+1 {{'pe.skew_grad' op operand 'dy' must be fully static, got 'tensor<?x4x4xf32>'}}
  %0 = pe.skew_grad %dy dim(4) : tensor<?x4x4xf32> -> tensor<?x6xf32>
  return
}

// -----

// skew_grad: dim is at least 2.
func.func @f(%dy: tensor<1x1xf32>) {
  // expected-error @+1 {{'pe.skew_grad' op dim must be at least 2, got 1}}
  %0 = pe.skew_grad %dy dim(1) : tensor<1x1xf32> -> tensor<0xf32>
  return
}

// -----

// skew_grad: dy is [..., dim, dim].
func.func @f(%dy: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'pe.skew_grad' op operand 'dy' must have shape [2, 5, 5] ([..., dim, dim]), got 'tensor<2x4x4xf32>'}}
  %0 = pe.skew_grad %dy dim(5) : tensor<2x4x4xf32> -> tensor<2x10xf32>
  return
}

// -----

// skew_grad: dparams is [..., dim(dim-1)/2].
func.func @f(%dy: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'pe.skew_grad' op result 'dparams' must have shape [2, 6] ([..., dim*(dim-1)/2]), got 'tensor<12xf32>'}}
  %0 = pe.skew_grad %dy dim(4) : tensor<2x4x4xf32> -> tensor<12xf32>
  return
}

// -----

// sparse_skew_grad: dy is one static matrix.
func.func @f(%dy: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'pe.sparse_skew_grad' op operand 'dy' must have rank 2, got 'tensor<2x4x4xf32>'}}
  %0 = pe.sparse_skew_grad %dy dim(4) support([0, 2, 5]) : tensor<2x4x4xf32> -> tensor<3xf32>
  return
}

// -----

// sparse_skew_grad: dim is at least 2.
func.func @f(%dy: tensor<1x1xf32>) {
  // expected-error @+1 {{'pe.sparse_skew_grad' op dim must be at least 2, got 1}}
  %0 = pe.sparse_skew_grad %dy dim(1) support([0]) : tensor<1x1xf32> -> tensor<1xf32>
  return
}

// -----

// sparse_skew_grad: the support is not empty.
func.func @f(%dy: tensor<4x4xf32>) {
  // expected-error @+1 {{'pe.sparse_skew_grad' op support must not be empty}}
  %0 = pe.sparse_skew_grad %dy dim(4) support([]) : tensor<4x4xf32> -> tensor<0xf32>
  return
}

// -----

// sparse_skew_grad: support indices are upper-triangle indices.
func.func @f(%dy: tensor<4x4xf32>) {
  // expected-error @+1 {{'pe.sparse_skew_grad' op support index 6 is out of range [0, 6)}}
  %0 = pe.sparse_skew_grad %dy dim(4) support([0, 6]) : tensor<4x4xf32> -> tensor<2xf32>
  return
}

// -----

// sparse_skew_grad: the support is strictly increasing.
func.func @f(%dy: tensor<4x4xf32>) {
  // expected-error @+1 {{'pe.sparse_skew_grad' op support must be strictly increasing, got 2 before 2}}
  %0 = pe.sparse_skew_grad %dy dim(4) support([0, 2, 2]) : tensor<4x4xf32> -> tensor<3xf32>
  return
}

// -----

// sparse_skew_grad: dy is [dim, dim].
func.func @f(%dy: tensor<5x5xf32>) {
  // expected-error @+1 {{'pe.sparse_skew_grad' op operand 'dy' must have shape [4, 4] ([dim, dim]), got 'tensor<5x5xf32>'}}
  %0 = pe.sparse_skew_grad %dy dim(4) support([0, 2, 5]) : tensor<5x5xf32> -> tensor<3xf32>
  return
}

// -----

// sparse_skew_grad: dparams has one entry per support index.
func.func @f(%dy: tensor<4x4xf32>) {
  // expected-error @+1 {{'pe.sparse_skew_grad' op result 'dparams' must have shape [3] ([K], one per support index), got 'tensor<6xf32>'}}
  %0 = pe.sparse_skew_grad %dy dim(4) support([0, 2, 5]) : tensor<4x4xf32> -> tensor<6xf32>
  return
}

// -----

// cayley_grad: x must have a rank.
func.func @f(%x: tensor<f32>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'pe.cayley_grad' op operand 'x' must have rank at least 1, got 'tensor<f32>'}}
  %0:2 = pe.cayley_grad %x, %s, %x : tensor<f32>, tensor<1x1xf32>, tensor<f32> -> (tensor<f32>, tensor<1x1xf32>)
  return
}

// -----

// cayley_grad: s is static.
func.func @f(%x: tensor<?x8x4xf32>, %s: tensor<?x4xf32>) {
  // expected-error @+1 {{'pe.cayley_grad' op operand 's' must be fully static, got 'tensor<?x4xf32>'}}
  %0:2 = pe.cayley_grad %x, %s, %x : tensor<?x8x4xf32>, tensor<?x4xf32>, tensor<?x8x4xf32> -> (tensor<?x8x4xf32>, tensor<?x4xf32>)
  return
}

// -----

// cayley_grad: s is [D, D].
func.func @f(%x: tensor<?x8x4xf32>, %s: tensor<8x8xf32>) {
  // expected-error @+1 {{'pe.cayley_grad' op operand 's' must have shape [4, 4] ([D, D]), got 'tensor<8x8xf32>'}}
  %0:2 = pe.cayley_grad %x, %s, %x : tensor<?x8x4xf32>, tensor<8x8xf32>, tensor<?x8x4xf32> -> (tensor<?x8x4xf32>, tensor<8x8xf32>)
  return
}

// -----

// cayley_grad: dy has the shape of x.
func.func @f(%x: tensor<?x8x4xf32>, %s: tensor<4x4xf32>, %dy: tensor<?x4xf32>) {
  // expected-error @+1 {{'pe.cayley_grad' op operand 'dy' must have shape [?, 8, 4] (the shape of 'x'), got 'tensor<?x4xf32>'}}
  %0:2 = pe.cayley_grad %x, %s, %dy : tensor<?x8x4xf32>, tensor<4x4xf32>, tensor<?x4xf32> -> (tensor<?x8x4xf32>, tensor<4x4xf32>)
  return
}

// -----

// cayley_grad: dx has the shape of x.
func.func @f(%x: tensor<?x8x4xf32>, %s: tensor<4x4xf32>) {
  // expected-error @+1 {{'pe.cayley_grad' op result 'dx' must have shape [?, 8, 4] (the shape of 'x'), got 'tensor<?x4xf32>'}}
  %0:2 = pe.cayley_grad %x, %s, %x : tensor<?x8x4xf32>, tensor<4x4xf32>, tensor<?x8x4xf32> -> (tensor<?x4xf32>, tensor<4x4xf32>)
  return
}

// -----

// cayley_grad: ds has the shape of s.
func.func @f(%x: tensor<?x8x4xf32>, %s: tensor<4x4xf32>) {
  // expected-error @+1 {{'pe.cayley_grad' op result 'ds' must have shape [4, 4] (the shape of 's'), got 'tensor<6xf32>'}}
  %0:2 = pe.cayley_grad %x, %s, %x : tensor<?x8x4xf32>, tensor<4x4xf32>, tensor<?x8x4xf32> -> (tensor<?x8x4xf32>, tensor<6xf32>)
  return
}

// -----

// generator_exp_grad: r is static.
func.func @f(%r: tensor<?x2xf32>, %L: tensor<2x4x4xf32>, %dy: tensor<8x4x4xf32>) {
  // expected-error @+1 {{'pe.generator_exp_grad' op operand 'r' must be fully static, got 'tensor<?x2xf32>'}}
  %0 = pe.generator_exp_grad %r, %L, %dy : tensor<?x2xf32>, tensor<2x4x4xf32>, tensor<8x4x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

// generator_exp_grad: generators are [K, d, d].
func.func @f(%r: tensor<8x2xf32>, %L: tensor<2x16xf32>, %dy: tensor<8x4x4xf32>) {
  // expected-error @+1 {{'pe.generator_exp_grad' op operand 'generators' must have rank 3, got 'tensor<2x16xf32>'}}
  %0 = pe.generator_exp_grad %r, %L, %dy : tensor<8x2xf32>, tensor<2x16xf32>, tensor<8x4x4xf32> -> tensor<2x16xf32>
  return
}

// -----

// generator_exp_grad: generators are square.
func.func @f(%r: tensor<8x2xf32>, %L: tensor<2x4x3xf32>, %dy: tensor<8x4x3xf32>) {
  // expected-error @+1 {{'pe.generator_exp_grad' op operand 'generators' must hold square matrices [K, d, d], got 'tensor<2x4x3xf32>'}}
  %0 = pe.generator_exp_grad %r, %L, %dy : tensor<8x2xf32>, tensor<2x4x3xf32>, tensor<8x4x3xf32> -> tensor<2x4x3xf32>
  return
}

// -----

// generator_exp_grad: one coefficient per generator.
func.func @f(%r: tensor<8x3xf32>, %L: tensor<2x4x4xf32>, %dy: tensor<8x4x4xf32>) {
  // expected-error @+1 {{'pe.generator_exp_grad' op the last dimension of 'r' (3) must equal the number of generators (2)}}
  %0 = pe.generator_exp_grad %r, %L, %dy : tensor<8x3xf32>, tensor<2x4x4xf32>, tensor<8x4x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

// generator_exp_grad: dy has the shape of the forward result.
func.func @f(%r: tensor<8x2xf32>, %L: tensor<2x4x4xf32>, %dy: tensor<8x2x4x4xf32>) {
  // expected-error @+1 {{'pe.generator_exp_grad' op operand 'dy' must have shape [8, 4, 4] ([..., d, d], the shape of the forward result), got 'tensor<8x2x4x4xf32>'}}
  %0 = pe.generator_exp_grad %r, %L, %dy : tensor<8x2xf32>, tensor<2x4x4xf32>, tensor<8x2x4x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

// generator_exp_grad: dgenerators has the shape of generators.
func.func @f(%r: tensor<8x2xf32>, %L: tensor<2x4x4xf32>, %dy: tensor<8x4x4xf32>) {
  // expected-error @+1 {{'pe.generator_exp_grad' op result 'dgenerators' must have shape [2, 4, 4] (the shape of 'generators'), got 'tensor<8x4x4xf32>'}}
  %0 = pe.generator_exp_grad %r, %L, %dy : tensor<8x2xf32>, tensor<2x4x4xf32>, tensor<8x4x4xf32> -> tensor<8x4x4xf32>
  return
}

// -----

// apply_rotation_grad: x is [B, T, D].
func.func @f(%x: tensor<?x64xf32>, %R: tensor<8x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation_grad' op operand 'x' must have rank 3, got 'tensor<?x64xf32>'}}
  %0:2 = pe.apply_rotation_grad %x, %R, %x heads(4) : tensor<?x64xf32>, tensor<8x16x16xf32>, tensor<?x64xf32> -> (tensor<?x64xf32>, tensor<8x16x16xf32>)
  return
}

// -----

// apply_rotation_grad: rotations are static.
func.func @f(%x: tensor<?x8x64xf32>, %R: tensor<?x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation_grad' op operand 'rotations' must be fully static, got 'tensor<?x16x16xf32>'}}
  %0:2 = pe.apply_rotation_grad %x, %R, %x heads(4) : tensor<?x8x64xf32>, tensor<?x16x16xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<?x16x16xf32>)
  return
}

// -----

// apply_rotation_grad: heads divide the width.
func.func @f(%x: tensor<?x8x64xf32>, %R: tensor<8x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation_grad' op heads (0) must be positive and divide the model width 64}}
  %0:2 = pe.apply_rotation_grad %x, %R, %x heads(0) : tensor<?x8x64xf32>, tensor<8x16x16xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<8x16x16xf32>)
  return
}

// -----

// apply_rotation_grad: rotations are [T, Dh, Dh].
func.func @f(%x: tensor<?x8x64xf32>, %R: tensor<8x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation_grad' op operand 'rotations' must have shape [8, 32, 32] ([T, Dh, Dh]), got 'tensor<8x16x16xf32>'}}
  %0:2 = pe.apply_rotation_grad %x, %R, %x heads(2) : tensor<?x8x64xf32>, tensor<8x16x16xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<8x16x16xf32>)
  return
}

// -----

// apply_rotation_grad: dy has the shape of x.
func.func @f(%x: tensor<?x8x64xf32>, %R: tensor<8x16x16xf32>, %dy: tensor<?x8x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation_grad' op operand 'dy' must have shape [?, 8, 64] (the shape of 'x'), got 'tensor<?x8x16xf32>'}}
  %0:2 = pe.apply_rotation_grad %x, %R, %dy heads(4) : tensor<?x8x64xf32>, tensor<8x16x16xf32>, tensor<?x8x16xf32> -> (tensor<?x8x64xf32>, tensor<8x16x16xf32>)
  return
}

// -----

// apply_rotation_grad: dx has the shape of x.
func.func @f(%x: tensor<?x8x64xf32>, %R: tensor<8x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation_grad' op result 'dx' must have shape [?, 8, 64] (the shape of 'x'), got 'tensor<?x8x16xf32>'}}
  %0:2 = pe.apply_rotation_grad %x, %R, %x heads(4) : tensor<?x8x64xf32>, tensor<8x16x16xf32>, tensor<?x8x64xf32> -> (tensor<?x8x16xf32>, tensor<8x16x16xf32>)
  return
}

// -----

// apply_rotation_grad: drotations has the shape of rotations.
func.func @f(%x: tensor<?x8x64xf32>, %R: tensor<8x16x16xf32>) {
  // expected-error @+1 {{'pe.apply_rotation_grad' op result 'drotations' must have shape [8, 16, 16] (the shape of 'rotations'), got 'tensor<16x16xf32>'}}
  %0:2 = pe.apply_rotation_grad %x, %R, %x heads(4) : tensor<?x8x64xf32>, tensor<8x16x16xf32>, tensor<?x8x64xf32> -> (tensor<?x8x64xf32>, tensor<16x16xf32>)
  return
}

// -----

// commutator_norm_grad: generators are static.
func.func @f(%L: tensor<?x4x4xf32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.commutator_norm_grad' op operand 'generators' must be fully static, got 'tensor<?x4x4xf32>'}}
  %0 = pe.commutator_norm_grad %L, %dy : tensor<?x4x4xf32>, tensor<f32> -> tensor<?x4x4xf32>
  return
}

// -----

// commutator_norm_grad: generators are square.
func.func @f(%L: tensor<2x4x5xf32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.commutator_norm_grad' op operand 'generators' must hold square matrices [K, d, d], got 'tensor<2x4x5xf32>'}}
  %0 = pe.commutator_norm_grad %L, %dy : tensor<2x4x5xf32>, tensor<f32> -> tensor<2x4x5xf32>
  return
}

// -----

// commutator_norm_grad: at least one pair.
func.func @f(%L: tensor<1x4x4xf32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.commutator_norm_grad' op needs at least 2 generators, got 1}}
  %0 = pe.commutator_norm_grad %L, %dy : tensor<1x4x4xf32>, tensor<f32> -> tensor<1x4x4xf32>
  return
}

// -----

// commutator_norm_grad: dgenerators has the shape of generators.
func.func @f(%L: tensor<2x4x4xf32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.commutator_norm_grad' op result 'dgenerators' must have shape [2, 4, 4] (the shape of 'generators'), got 'tensor<4x4xf32>'}}
  %0 = pe.commutator_norm_grad %L, %dy : tensor<2x4x4xf32>, tensor<f32> -> tensor<4x4xf32>
  return
}

// -----

// spd_gate_grad: x is [B, T, D].
func.func @f(%x: tensor<?x32xf32>, %g: tensor<32xf32>) {
  // expected-error @+1 {{'pe.spd_gate_grad' op operand 'x' must have rank 3, got 'tensor<?x32xf32>'}}
  %0:2 = pe.spd_gate_grad %x, %g, %x : tensor<?x32xf32>, tensor<32xf32>, tensor<?x32xf32> -> (tensor<?x32xf32>, tensor<32xf32>)
  return
}

// -----

// spd_gate_grad: gamma is static.
func.func @f(%x: tensor<?x8x32xf32>, %g: tensor<?x32xf32>) {
  // expected-error @+1 {{'pe.spd_gate_grad' op operand 'gamma' must be fully static, got 'tensor<?x32xf32>'}}
  %0:2 = pe.spd_gate_grad %x, %g, %x : tensor<?x8x32xf32>, tensor<?x32xf32>, tensor<?x8x32xf32> -> (tensor<?x8x32xf32>, tensor<?x32xf32>)
  return
}

// -----

// spd_gate_grad: gamma is [D] or [T, D].
func.func @f(%x: tensor<?x8x32xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'pe.spd_gate_grad' op operand 'gamma' must have shape [32] or [8, 32] ([D] or [T, D]), got 'tensor<16xf32>'}}
  %0:2 = pe.spd_gate_grad %x, %g, %x : tensor<?x8x32xf32>, tensor<16xf32>, tensor<?x8x32xf32> -> (tensor<?x8x32xf32>, tensor<16xf32>)
  return
}

// -----

// spd_gate_grad: dy has the shape of x.
func.func @f(%x: tensor<?x8x32xf32>, %g: tensor<32xf32>, %dy: tensor<?x32xf32>) {
  // expected-error @+1 {{'pe.spd_gate_grad' op operand 'dy' must have shape [?, 8, 32] (the shape of 'x'), got 'tensor<?x32xf32>'}}
  %0:2 = pe.spd_gate_grad %x, %g, %dy : tensor<?x8x32xf32>, tensor<32xf32>, tensor<?x32xf32> -> (tensor<?x8x32xf32>, tensor<32xf32>)
  return
}

// -----

// spd_gate_grad: dx has the shape of x.
func.func @f(%x: tensor<?x8x32xf32>, %g: tensor<32xf32>) {
  // expected-error @+1 {{'pe.spd_gate_grad' op result 'dx' must have shape [?, 8, 32] (the shape of 'x'), got 'tensor<1x8x32xf32>'}}
  %0:2 = pe.spd_gate_grad %x, %g, %x : tensor<?x8x32xf32>, tensor<32xf32>, tensor<?x8x32xf32> -> (tensor<1x8x32xf32>, tensor<32xf32>)
  return
}

// -----

// spd_gate_grad: dgamma has the shape of gamma.
func.func @f(%x: tensor<?x8x32xf32>, %g: tensor<8x32xf32>) {
  // expected-error @+1 {{'pe.spd_gate_grad' op result 'dgamma' must have shape [8, 32] (the shape of 'gamma'), got 'tensor<32xf32>'}}
  %0:2 = pe.spd_gate_grad %x, %g, %x : tensor<?x8x32xf32>, tensor<8x32xf32>, tensor<?x8x32xf32> -> (tensor<?x8x32xf32>, tensor<32xf32>)
  return
}

// -----

// cross_entropy_grad: label smoothing lies in [0, 1).
func.func @f(%l: tensor<?x10xf32>, %y: tensor<?xi32>, %dy: tensor<f32>) {
  // expected-error @+1 {{'pe.cross_entropy_grad' op smoothing must be in [0, 1), got 1.000000e+00}}
  %0 = pe.cross_entropy_grad %l, %y, %dy {smoothing = 1.0 : f64} : tensor<?x10xf32>, tensor<?xi32>, tensor<f32> -> tensor<?x10xf32>
  return
}
