// One case per verifier rule of the hoisted and fused ops (PEFusedOps.td).
// RUN: string-opt %s -split-input-file -verify-diagnostics

func.func @f(%pos: tensor<5x3xf32>, %f: tensor<4x3xf32>) {
  // expected-error @+1 {{'pe.rope_table' op operand 'pos' must have 1 or 2 axes, got 3}}
  %t = pe.rope_table %pos, %f : tensor<5x3xf32>, tensor<4x3xf32> -> tensor<5x4x2xf32>
  return
}

// -----

func.func @f(%pos: tensor<5x2xf32>, %f: tensor<4x2xf32>) {
  // expected-error @+1 {{'pe.rope_table' op result type must be 'tensor<5x4x2xf32>', got 'tensor<5x4x1xf32>'}}
  %t = pe.rope_table %pos, %f : tensor<5x2xf32>, tensor<4x2xf32> -> tensor<5x4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<?x5x8xf32>, %t: tensor<5x3x2xf32>) {
  // expected-error @+1 {{'pe.rope_apply' op operand 'table' must have shape [5, 4, 2] ([T, D/2, 2])}}
  %y = pe.rope_apply %x, %t : tensor<?x5x8xf32>, tensor<5x3x2xf32> -> tensor<?x5x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x5x7xf32>, %t: tensor<5x3x2xf32>) {
  // expected-error @+1 {{'pe.rope_apply' op the last dimension of 'x' must be even (interleaved pairs), got 7}}
  %y = pe.rope_apply %x, %t : tensor<?x5x7xf32>, tensor<5x3x2xf32> -> tensor<?x5x7xf32>
  return
}

// -----

func.func @f(%s: tensor<4x5xf32>) {
  // expected-error @+1 {{'pe.cayley_weight' op operand 's' must have shape [4, 4] ([D, D])}}
  %w = pe.cayley_weight %s : tensor<4x5xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @f(%q: tensor<?x5x8xf32>, %t: tensor<5x4x2xf32>) {
  // expected-error @+1 {{'pe.rope_attention' op mask 'skip' is not supported (a skip mask ignores 'q' and 'k'; use pe.attention)}}
  %o = pe.rope_attention %q, %q, %q, %t heads(2) scale(5.000000e-01) mask(skip) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  return
}

// -----

func.func @f(%q: tensor<?x5x12xf32>, %t: tensor<5x6x2xf32>) {
  // expected-error @+1 {{'pe.rope_attention' op the head width D / heads must be even (rotary pairs within a head), got 3}}
  %o = pe.rope_attention %q, %q, %q, %t heads(4) scale(5.000000e-01) mask(none) : tensor<?x5x12xf32>, tensor<?x5x12xf32>, tensor<?x5x12xf32>, tensor<5x6x2xf32> -> tensor<?x5x12xf32>
  return
}

// -----

func.func @f(%q: tensor<?x5x8xf32>, %k: tensor<?x4x8xf32>, %t: tensor<5x4x2xf32>) {
  // expected-error @+1 {{'pe.rope_attention' op operands 'q', 'k' and 'v' must have the same type}}
  %o = pe.rope_attention %q, %k, %q, %t heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x4x8xf32>, tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x5x4xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'pe.linear_gelu' op operand 'b' must have shape [8] ([O])}}
  %y, %p = pe.linear_gelu %x, %w, %b : tensor<?x5x4xf32>, tensor<4x8xf32>, tensor<4xf32> -> (tensor<?x5x8xf32>, tensor<?x5x8xf32>)
  return
}

// -----

func.func @f(%x: tensor<?x5x4xf32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'pe.linear_gelu' op result 'pre' must have shape [?, 5, 8] ([..., O])}}
  %y, %p = pe.linear_gelu %x, %w : tensor<?x5x4xf32>, tensor<4x8xf32> -> (tensor<?x5x8xf32>, tensor<?x5x4xf32>)
  return
}

// -----

func.func @f(%r: tensor<?x5x4xf32>, %x: tensor<?x5x4xf32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{'pe.linear_residual' op operand 'residual' must have shape [?, 5, 8] (the result shape [..., O])}}
  %y = pe.linear_residual %r, %x, %w : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<4x8xf32> -> tensor<?x5x8xf32>
  return
}

// -----

func.func @f(%pos: tensor<5x2xf32>, %f: tensor<4x2xf32>, %dy: tensor<5x4x1xf32>) {
  // expected-error @+1 {{'pe.rope_table_grad' op operand 'dy' must have shape [5, 4, 2] (the table shape [T, P, 2])}}
  %d = pe.rope_table_grad %pos, %f, %dy : tensor<5x2xf32>, tensor<4x2xf32>, tensor<5x4x1xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @f(%x: tensor<?x5x8xf32>) {
  // expected-error @+1 {{'pe.rope_apply_grad_table' op result 'dtable' must have shape [5, 4, 2] ([T, D/2, 2])}}
  %d = pe.rope_apply_grad_table %x, %x : tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<5x8x2xf32>
  return
}

// -----

func.func @f(%s: tensor<4x4xf32>, %dw: tensor<4x3xf32>) {
  // expected-error @+1 {{'pe.cayley_weight_grad' op operand 'dw' must have shape [4, 4] (the shape of 's')}}
  %d = pe.cayley_weight_grad %s, %dw : tensor<4x4xf32>, tensor<4x3xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%s: tensor<4x4xf32>, %dw: tensor<4x4xf32>, %w: tensor<4x5xf32>) {
  // expected-error @+1 {{'pe.cayley_weight_grad' op operand 'weight' must have shape [4, 4] (the shape of 's')}}
  %d = pe.cayley_weight_grad %s, %dw weight %w : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x5xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%q: tensor<?x5x8xf32>, %t: tensor<5x4x2xf32>, %dy: tensor<?x5x4xf32>, %lse: tensor<?x2x5xf32>) {
  // expected-error @+1 {{'pe.rope_attention_grad' op operand 'dy' must have shape [?, 5, 8] (the shape of 'q')}}
  %a, %b, %c = pe.rope_attention_grad %q, %q, %q, %t, %q, %lse, %dy heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<5x4x2xf32>, tensor<?x5x8xf32>, tensor<?x2x5xf32>, tensor<?x5x4xf32> -> (tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>)
  return
}

// -----

func.func @f(%p: tensor<?x5x4xf32>, %dy: tensor<?x5x8xf32>, %w: tensor<6x8xf32>) {
  // expected-error @+1 {{'pe.linear_grad_input_acc' op operand 'prior' must have shape [?, 5, 6] (the result shape [..., I])}}
  %d = pe.linear_grad_input_acc %p, %dy, %w : tensor<?x5x4xf32>, tensor<?x5x8xf32>, tensor<6x8xf32> -> tensor<?x5x6xf32>
  return
}

// -----

func.func @f(%p: tensor<?x5x4xf32>, %x: tensor<?x5x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad_acc' op operand 'prior' must have shape [?, 5, 8] (the shape of 'x')}}
  %a, %b, %c = pe.layer_norm_grad_acc %p, %x, %g, %x : tensor<?x5x4xf32>, tensor<?x5x8xf32>, tensor<8xf32>, tensor<?x5x8xf32> -> (tensor<?x5x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// The rules of pe.layer_norm_grad hold too.
func.func @f(%x: tensor<?x5x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad_acc' op operand 'gamma' must have shape [8] ([D]), got 'tensor<4xf32>'}}
  %a, %b, %c = pe.layer_norm_grad_acc %x, %x, %g, %x : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<4xf32>, tensor<?x5x8xf32> -> (tensor<?x5x8xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%x: tensor<?x5x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'pe.layer_norm_grad_acc' op result 'dgamma' must have shape [8] ([D])}}
  %a, %b, %c = pe.layer_norm_grad_acc %x, %x, %g, %x : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<8xf32>, tensor<?x5x8xf32> -> (tensor<?x5x8xf32>, tensor<5xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%q: tensor<?x5x8xf32>, %t: tensor<5x4x2xf32>) {
  // expected-error @+1 {{'pe.rope_attention' op result 'lse' must have shape [?, 2, 5] ([B, heads, T]), got 'tensor<?x5x2xf32>'}}
  %o, %l = pe.rope_attention %q, %q, %q, %t heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>, tensor<?x5x2xf32>
  return
}

// -----

func.func @f(%q: tensor<?x5x8xf32>, %t: tensor<5x4x2xf32>, %lse: tensor<?x2x5xf32>) {
  // expected-error @+1 {{'pe.rope_attention_grad' op operand 'y' must have shape [?, 5, 8] (the shape of 'q'), got 'tensor<?x2x5xf32>'}}
  %a, %b, %c = pe.rope_attention_grad %q, %q, %q, %t, %lse, %lse, %q heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<5x4x2xf32>, tensor<?x2x5xf32>, tensor<?x2x5xf32>, tensor<?x5x8xf32> -> (tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>)
  return
}
