// The hoisted and fused ops (PEFusedOps.td) and their backward ops survive
// print -> parse -> print, in the custom and in the generic form.
// RUN: string-opt %s | string-opt | FileCheck %s
// RUN: string-opt %s -mlir-print-op-generic | string-opt | FileCheck %s

// CHECK-LABEL: func.func @fused(
// CHECK: pe.rope_table %{{.*}}, %{{.*}} : tensor<50x2xf32>, tensor<32x2xf32> -> tensor<50x32x2xf32>
// CHECK: pe.rope_apply %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>
// CHECK: pe.rope_apply %{{.*}}, %{{.*}} inverse(true) : tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>
// CHECK: pe.cayley_weight %{{.*}} : tensor<64x64xf32> -> tensor<64x64xf32>
// CHECK: pe.rope_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads(4) scale(2.500000e-01) mask(causal) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>
// CHECK: pe.rope_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>, tensor<?x4x50xf32>
// CHECK: pe.linear_gelu %{{.*}}, %{{.*}}, %{{.*}} approximate(true) : tensor<?x50x64xf32>, tensor<64x128xf32>, tensor<128xf32> -> (tensor<?x50x128xf32>, tensor<?x50x128xf32>)
// CHECK: pe.linear_gelu %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<64x128xf32> -> (tensor<?x50x128xf32>, tensor<?x50x128xf32>)
// CHECK: pe.linear_residual %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<?x50x128xf32>, tensor<128x64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
// CHECK: pe.linear_grad_input_acc %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<?x50x128xf32>, tensor<64x128xf32> -> tensor<?x50x64xf32>
// CHECK: pe.layer_norm_grad_acc %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
// CHECK: pe.layer_norm_grad_acc %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} epsilon(9.9999999999999995E-7) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
// CHECK: pe.rope_table_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<50x2xf32>, tensor<32x2xf32>, tensor<50x32x2xf32> -> tensor<32x2xf32>
// CHECK: pe.rope_apply_grad_table %{{.*}}, %{{.*}} inverse(true) : tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<50x32x2xf32>
// CHECK: pe.cayley_weight_grad %{{.*}}, %{{.*}} : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
// CHECK: pe.cayley_weight_grad %{{.*}}, %{{.*}} weight %{{.*}} : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
// CHECK: pe.rope_attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x32x2xf32>, tensor<?x50x64xf32>, tensor<?x4x50xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>)
func.func @fused(%x: tensor<?x50x64xf32>, %h: tensor<?x50x128xf32>, %pos: tensor<50x2xf32>, %f: tensor<32x2xf32>, %s: tensor<64x64xf32>, %w1: tensor<64x128xf32>, %b1: tensor<128xf32>, %w2: tensor<128x64xf32>, %b2: tensor<64xf32>, %dt: tensor<50x32x2xf32>, %lse: tensor<?x4x50xf32>) {
  %t = pe.rope_table %pos, %f : tensor<50x2xf32>, tensor<32x2xf32> -> tensor<50x32x2xf32>
  %y = pe.rope_apply %x, %t : tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>
  %dx = pe.rope_apply %x, %t inverse(true) : tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>
  %w = pe.cayley_weight %s : tensor<64x64xf32> -> tensor<64x64xf32>
  %o = pe.rope_attention %x, %x, %x, %t heads(4) scale(2.500000e-01) mask(causal) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>
  %o2, %olse = pe.rope_attention %x, %x, %x, %t heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x32x2xf32> -> tensor<?x50x64xf32>, tensor<?x4x50xf32>
  %g, %pre = pe.linear_gelu %x, %w1, %b1 approximate(true) : tensor<?x50x64xf32>, tensor<64x128xf32>, tensor<128xf32> -> (tensor<?x50x128xf32>, tensor<?x50x128xf32>)
  %g2, %pre2 = pe.linear_gelu %x, %w1 : tensor<?x50x64xf32>, tensor<64x128xf32> -> (tensor<?x50x128xf32>, tensor<?x50x128xf32>)
  %r = pe.linear_residual %x, %h, %w2, %b2 : tensor<?x50x64xf32>, tensor<?x50x128xf32>, tensor<128x64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
  %acc = pe.linear_grad_input_acc %x, %h, %w1 : tensor<?x50x64xf32>, tensor<?x50x128xf32>, tensor<64x128xf32> -> tensor<?x50x64xf32>
  %lx, %lg, %lb = pe.layer_norm_grad_acc %x, %x, %b2, %x : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %lx2, %lg2, %lb2 = pe.layer_norm_grad_acc %x, %x, %b2, %x epsilon(1.0e-6) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<64xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %df = pe.rope_table_grad %pos, %f, %dt : tensor<50x2xf32>, tensor<32x2xf32>, tensor<50x32x2xf32> -> tensor<32x2xf32>
  %dtab = pe.rope_apply_grad_table %x, %x inverse(true) : tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<50x32x2xf32>
  %ds = pe.cayley_weight_grad %s, %s : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %dsw = pe.cayley_weight_grad %s, %s weight %w : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %dq, %dk, %dv = pe.rope_attention_grad %x, %x, %x, %t, %x, %lse, %x heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<50x32x2xf32>, tensor<?x50x64xf32>, tensor<?x4x50xf32>, tensor<?x50x64xf32> -> (tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32>)
  return
}
