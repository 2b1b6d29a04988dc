// Every backward op of the layer and positional-encoding families
// (PELayerOps.td, PEPositionOps.td) survives print -> parse -> print, in its
// custom form and in the generic form.
// RUN: string-opt %s | string-opt | FileCheck %s
// RUN: string-opt %s -mlir-print-op-generic | string-opt | FileCheck %s

// Broadcasting and reductions: a suffix (down to a scalar, or the whole shape),
// a broadcast with and without `like`, new axes anywhere, the gradient of a
// mean over an axis (the batch too) and over everything.
// CHECK-LABEL: func.func @broadcast(
func.func @broadcast(%x: tensor<?x50x64xf32>, %v: tensor<64xf32>, %s: tensor<f32>, %l: tensor<?x50xf32>, %m: tensor<?x64xf32>) {
  // CHECK: %{{.*}} = pe.sum_to %{{.*}} : tensor<?x50x64xf32> -> tensor<50x64xf32>
  %0 = pe.sum_to %x : tensor<?x50x64xf32> -> tensor<50x64xf32>
  // CHECK: %{{.*}} = pe.sum_to %{{.*}} : tensor<?x50x64xf32> -> tensor<f32>
  %1 = pe.sum_to %x : tensor<?x50x64xf32> -> tensor<f32>
  // CHECK: %{{.*}} = pe.sum_to %{{.*}} : tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  %2 = pe.sum_to %x : tensor<?x50x64xf32> -> tensor<?x50x64xf32>
  // CHECK: %{{.*}} = pe.broadcast_to %{{.*}} : tensor<64xf32> -> tensor<50x64xf32>
  %3 = pe.broadcast_to %v : tensor<64xf32> -> tensor<50x64xf32>
  // CHECK: %{{.*}} = pe.broadcast_to %{{.*}}, %{{.*}} : tensor<f32>, tensor<?x50xf32> -> tensor<?x50xf32>
  %4 = pe.broadcast_to %s, %l : tensor<f32>, tensor<?x50xf32> -> tensor<?x50xf32>
  // CHECK: %{{.*}} = pe.broadcast_to %{{.*}} : tensor<?x64xf32> -> tensor<?x64xf32>
  %5 = pe.broadcast_to %m : tensor<?x64xf32> -> tensor<?x64xf32>
  // CHECK: %{{.*}} = pe.expand_axis %{{.*}} axis(1) size(50) : tensor<?x64xf32> -> tensor<?x50x64xf32>
  %6 = pe.expand_axis %m axis(1) size(50) : tensor<?x64xf32> -> tensor<?x50x64xf32>
  // CHECK: %{{.*}} = pe.expand_axis %{{.*}} axis(0) size(3) : tensor<64xf32> -> tensor<3x64xf32>
  %7 = pe.expand_axis %v axis(0) size(3) : tensor<64xf32> -> tensor<3x64xf32>
  // CHECK: %{{.*}} = pe.expand_axis %{{.*}} axis(2) size(1) : tensor<?x64xf32> -> tensor<?x64x1xf32>
  %8 = pe.expand_axis %m axis(2) size(1) : tensor<?x64xf32> -> tensor<?x64x1xf32>
  // CHECK: %{{.*}} = pe.mean_grad %{{.*}}, %{{.*}} axis(1) : tensor<?x50x64xf32>, tensor<?x64xf32> -> tensor<?x50x64xf32>
  %9 = pe.mean_grad %x, %m axis(1) : tensor<?x50x64xf32>, tensor<?x64xf32> -> tensor<?x50x64xf32>
  // CHECK: %{{.*}} = pe.mean_grad %{{.*}}, %{{.*}} axis(0) : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  %10 = pe.mean_grad %m, %v axis(0) : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  // CHECK: %{{.*}} = pe.mean_grad %{{.*}}, %{{.*}} : tensor<?x50xf32>, tensor<f32> -> tensor<?x50xf32>
  %11 = pe.mean_grad %l, %s : tensor<?x50xf32>, tensor<f32> -> tensor<?x50xf32>
  // CHECK: %{{.*}} = pe.mean_grad %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32> -> tensor<f32>
  %12 = pe.mean_grad %s, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  return
}

// Network layers: linear (also rank-1), layer_norm with default and explicit
// epsilon, both gelu forms, relu.
// CHECK-LABEL: func.func @layers(
func.func @layers(%x: tensor<?x50x64xf32>, %dy: tensor<?x50x256xf32>, %w: tensor<64x256xf32>, %g: tensor<64xf32>, %dx: tensor<?x50x64xf32>, %h: tensor<?x50x256xf32>, %r: tensor<?x256xf32>, %v: tensor<64xf32>, %vo: tensor<256xf32>) {
  // CHECK: %{{.*}} = pe.linear_grad_input %{{.*}}, %{{.*}} : tensor<?x50x256xf32>, tensor<64x256xf32> -> tensor<?x50x64xf32>
  %0 = pe.linear_grad_input %dy, %w : tensor<?x50x256xf32>, tensor<64x256xf32> -> tensor<?x50x64xf32>
  // CHECK: %{{.*}} = pe.linear_grad_weight %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<?x50x256xf32> -> tensor<64x256xf32>
  %1 = pe.linear_grad_weight %x, %dy : tensor<?x50x64xf32>, tensor<?x50x256xf32> -> tensor<64x256xf32>
  // CHECK: %{{.*}} = pe.linear_grad_weight %{{.*}}, %{{.*}} : tensor<64xf32>, tensor<256xf32> -> tensor<64x256xf32>
  %2 = pe.linear_grad_weight %v, %vo : tensor<64xf32>, tensor<256xf32> -> tensor<64x256xf32>
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = pe.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %3:3 = pe.layer_norm_grad %x, %g, %dx : tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = pe.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} epsilon(9.9999999999999995E-7) : tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %4:3 = pe.layer_norm_grad %x, %g, %dx epsilon(1.0e-6) : tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
  // CHECK: %{{.*}} = pe.gelu_grad %{{.*}}, %{{.*}} : tensor<?x50x256xf32>, tensor<?x50x256xf32> -> tensor<?x50x256xf32>
  %5 = pe.gelu_grad %h, %dy : tensor<?x50x256xf32>, tensor<?x50x256xf32> -> tensor<?x50x256xf32>
  // CHECK: %{{.*}} = pe.gelu_grad %{{.*}}, %{{.*}} approximate(true) : tensor<?x50x256xf32>, tensor<?x50x256xf32> -> tensor<?x50x256xf32>
  %6 = pe.gelu_grad %h, %dy approximate(true) : tensor<?x50x256xf32>, tensor<?x50x256xf32> -> tensor<?x50x256xf32>
  // CHECK: %{{.*}} = pe.relu_grad %{{.*}}, %{{.*}} : tensor<?x256xf32>, tensor<?x256xf32> -> tensor<?x256xf32>
  %7 = pe.relu_grad %r, %r : tensor<?x256xf32>, tensor<?x256xf32> -> tensor<?x256xf32>
  return
}

// Embeddings: patch, token (V from the result type), class token, select
// (T from the result type).
// CHECK-LABEL: func.func @embeddings(
func.func @embeddings(%img: tensor<?x1x28x28xf32>, %de: tensor<?x49x64xf32>, %ids: tensor<?x64xi32>, %dt: tensor<?x64x128xf32>, %dc: tensor<?x50x64xf32>, %ds: tensor<?x64xf32>) {
  // CHECK: %{{.*}}, %{{.*}} = pe.patch_embed_grad %{{.*}}, %{{.*}} patch(4) : tensor<?x1x28x28xf32>, tensor<?x49x64xf32> -> (tensor<16x64xf32>, tensor<64xf32>)
  %0:2 = pe.patch_embed_grad %img, %de patch(4) : tensor<?x1x28x28xf32>, tensor<?x49x64xf32> -> (tensor<16x64xf32>, tensor<64xf32>)
  // CHECK: %{{.*}} = pe.token_embed_grad %{{.*}}, %{{.*}} : tensor<?x64xi32>, tensor<?x64x128xf32> -> tensor<256x128xf32>
  %1 = pe.token_embed_grad %ids, %dt : tensor<?x64xi32>, tensor<?x64x128xf32> -> tensor<256x128xf32>
  // CHECK: %{{.*}}, %{{.*}} = pe.class_token_grad %{{.*}} : tensor<?x50x64xf32> -> (tensor<?x49x64xf32>, tensor<64xf32>)
  %2:2 = pe.class_token_grad %dc : tensor<?x50x64xf32> -> (tensor<?x49x64xf32>, tensor<64xf32>)
  // CHECK: %{{.*}} = pe.select_token_grad %{{.*}} index(0) : tensor<?x64xf32> -> tensor<?x50x64xf32>
  %3 = pe.select_token_grad %ds index(0) : tensor<?x64xf32> -> tensor<?x50x64xf32>
  return
}

// Attention without rel (3 results; causal and skip masks) and with rel (4
// results), and the loss.
// CHECK-LABEL: func.func @attention(
func.func @attention(%q: tensor<?x64x128xf32>, %dy: tensor<?x64x128xf32>, %q4: tensor<?x8x4xf32>, %q5: tensor<?x50x64xf32>, %rel: tensor<50x50x16x16xf32>, %logits: tensor<?x10xf32>, %labels: tensor<?xi32>, %dl: tensor<f32>, %lse: tensor<?x4x64xf32>, %lse1: tensor<?x1x8xf32>, %lse2: tensor<?x4x50xf32>) {
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = pe.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads(4) scale(2.500000e-01) mask(causal) : tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x4x64xf32>, tensor<?x64x128xf32> -> (tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>)
  %0:3 = pe.attention_grad %q, %q, %q, %q, %lse, %dy heads(4) scale(0.25) mask(causal) : tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x4x64xf32>, tensor<?x64x128xf32> -> (tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32>)
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = pe.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads(1) scale(5.000000e-01) mask(skip) skip_base(1) : tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x1x8xf32>, tensor<?x8x4xf32> -> (tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x8x4xf32>)
  %1:3 = pe.attention_grad %q4, %q4, %q4, %q4, %lse1, %q4 heads(1) scale(0.5) mask(skip) skip_base(1) : tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x1x8xf32>, tensor<?x8x4xf32> -> (tensor<?x8x4xf32>, tensor<?x8x4xf32>, tensor<?x8x4xf32>)
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = pe.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x4x50xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32> -> (tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32>)
  %2:4 = pe.attention_grad %q5, %q5, %q5, %q5, %lse2, %q5, %rel heads(4) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x4x50xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32> -> (tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x50x16x16xf32>)
  // CHECK: %{{.*}}, %{{.*}} = pe.attention %{{.*}}, %{{.*}}, %{{.*}} heads(4) scale(2.500000e-01) mask(causal) : tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32> -> tensor<?x64x128xf32>, tensor<?x4x64xf32>
  %y, %ylse = pe.attention %q, %q, %q heads(4) scale(0.25) mask(causal) : tensor<?x64x128xf32>, tensor<?x64x128xf32>, tensor<?x64x128xf32> -> tensor<?x64x128xf32>, tensor<?x4x64xf32>
  // CHECK: %{{.*}} = pe.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x10xf32>, tensor<?xi32>, tensor<f32> -> tensor<?x10xf32>
  %3 = pe.cross_entropy_grad %logits, %labels, %dl : tensor<?x10xf32>, tensor<?xi32>, tensor<f32> -> tensor<?x10xf32>
  // CHECK: %{{.*}} = pe.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {smoothing = 1.000000e-01 : f64} : tensor<?x10xf32>, tensor<?xi32>, tensor<f32> -> tensor<?x10xf32>
  %4 = pe.cross_entropy_grad %logits, %labels, %dl {smoothing = 0.1 : f64} : tensor<?x10xf32>, tensor<?xi32>, tensor<f32> -> tensor<?x10xf32>
  return
}

// Rotary frequencies: axial and sequence RoPE, Householder.
// CHECK-LABEL: func.func @positions(
func.func @positions(%x: tensor<?x50x64xf32>, %pos: tensor<50x2xf32>, %f: tensor<32x2xf32>, %x1: tensor<?x64x32xf32>, %p1: tensor<64x1xf32>, %f1: tensor<16x1xf32>) {
  // CHECK: %{{.*}} = pe.rope_grad_freqs %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32>, tensor<?x50x64xf32> -> tensor<32x2xf32>
  %0 = pe.rope_grad_freqs %x, %pos, %f, %x : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32>, tensor<?x50x64xf32> -> tensor<32x2xf32>
  // CHECK: %{{.*}} = pe.rope_grad_freqs %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64x32xf32>, tensor<64x1xf32>, tensor<16x1xf32>, tensor<?x64x32xf32> -> tensor<16x1xf32>
  %1 = pe.rope_grad_freqs %x1, %p1, %f1, %x1 : tensor<?x64x32xf32>, tensor<64x1xf32>, tensor<16x1xf32>, tensor<?x64x32xf32> -> tensor<16x1xf32>
  // CHECK: %{{.*}}, %{{.*}} = pe.householder_grad_freqs %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32>, tensor<32x2xf32>, tensor<?x50x64xf32> -> (tensor<32x2xf32>, tensor<32x2xf32>)
  %2:2 = pe.householder_grad_freqs %x, %pos, %f, %f, %x : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32>, tensor<32x2xf32>, tensor<?x50x64xf32> -> (tensor<32x2xf32>, tensor<32x2xf32>)
  return
}

// Skew builders, Cayley, generator exponentials, rotations, commutators and
// SPD gates (both gamma shapes).
// CHECK-LABEL: func.func @rotations(
func.func @rotations(%dS: tensor<2x16x16xf32>, %d64: tensor<64x64xf32>, %d4: tensor<4x4xf32>, %x: tensor<?x50x64xf32>, %r: tensor<50x50x2xf32>, %L: tensor<2x16x16xf32>, %dR: tensor<50x50x16x16xf32>, %R: tensor<50x16x16xf32>, %dc: tensor<f32>, %xg: tensor<?x64x32xf32>, %g: tensor<32xf32>, %gt: tensor<64x32xf32>) {
  // CHECK: %{{.*}} = pe.skew_grad %{{.*}} dim(16) : tensor<2x16x16xf32> -> tensor<2x120xf32>
  %0 = pe.skew_grad %dS dim(16) : tensor<2x16x16xf32> -> tensor<2x120xf32>
  // CHECK: %{{.*}} = pe.skew_grad %{{.*}} dim(64) : tensor<64x64xf32> -> tensor<2016xf32>
  %1 = pe.skew_grad %d64 dim(64) : tensor<64x64xf32> -> tensor<2016xf32>
  // CHECK: %{{.*}} = pe.sparse_skew_grad %{{.*}} dim(4) support([0, 2, 5]) : tensor<4x4xf32> -> tensor<3xf32>
  %2 = pe.sparse_skew_grad %d4 dim(4) support([0, 2, 5]) : tensor<4x4xf32> -> tensor<3xf32>
  // CHECK: %{{.*}}, %{{.*}} = pe.cayley_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<64x64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64x64xf32>)
  %3:2 = pe.cayley_grad %x, %d64, %x : tensor<?x50x64xf32>, tensor<64x64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64x64xf32>)
  // CHECK: %{{.*}} = pe.generator_exp_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<50x50x2xf32>, tensor<2x16x16xf32>, tensor<50x50x16x16xf32> -> tensor<2x16x16xf32>
  %4 = pe.generator_exp_grad %r, %L, %dR : tensor<50x50x2xf32>, tensor<2x16x16xf32>, tensor<50x50x16x16xf32> -> tensor<2x16x16xf32>
  // CHECK: %{{.*}}, %{{.*}} = pe.apply_rotation_grad %{{.*}}, %{{.*}}, %{{.*}} heads(4) : tensor<?x50x64xf32>, tensor<50x16x16xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<50x16x16xf32>)
  %5:2 = pe.apply_rotation_grad %x, %R, %x heads(4) : tensor<?x50x64xf32>, tensor<50x16x16xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<50x16x16xf32>)
  // CHECK: %{{.*}} = pe.commutator_norm_grad %{{.*}}, %{{.*}} : tensor<2x16x16xf32>, tensor<f32> -> tensor<2x16x16xf32>
  %6 = pe.commutator_norm_grad %L, %dc : tensor<2x16x16xf32>, tensor<f32> -> tensor<2x16x16xf32>
  // CHECK: %{{.*}}, %{{.*}} = pe.spd_gate_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64x32xf32>, tensor<32xf32>, tensor<?x64x32xf32> -> (tensor<?x64x32xf32>, tensor<32xf32>)
  %7:2 = pe.spd_gate_grad %xg, %g, %xg : tensor<?x64x32xf32>, tensor<32xf32>, tensor<?x64x32xf32> -> (tensor<?x64x32xf32>, tensor<32xf32>)
  // CHECK: %{{.*}}, %{{.*}} = pe.spd_gate_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64x32xf32>, tensor<64x32xf32>, tensor<?x64x32xf32> -> (tensor<?x64x32xf32>, tensor<64x32xf32>)
  %8:2 = pe.spd_gate_grad %xg, %gt, %xg : tensor<?x64x32xf32>, tensor<64x32xf32>, tensor<?x64x32xf32> -> (tensor<?x64x32xf32>, tensor<64x32xf32>)
  return
}
