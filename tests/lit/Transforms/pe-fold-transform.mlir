// pe-fold-transform: cayley(linear(h, W [, b]), S) becomes
// linear(h, cayley(W, S) [, cayley(b, S)]): U applied to the weights once
// instead of to every token. The cases after the first two must be left
// alone.
// RUN: string-opt --pe-fold-transform -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-fold-transform=explain=true -split-input-file -verify-diagnostics %s -o /dev/null

// STRING order, rope(cayley(linear(h, W), S)), without a bias.
// CHECK-LABEL: func.func @string_order(
// CHECK-SAME:    %[[H:[^:]*]]: tensor<?x5x6xf32>, %[[POS:[^:]*]]: tensor<5x1xf32>, %[[F:[^:]*]]: tensor<2x1xf32>, %[[P:[^:]*]]: tensor<6xf32>)
// CHECK-NEXT:    %[[W:.*]] = pe.get_param @wq : tensor<6x4xf32>
// CHECK-NEXT:    %[[S:.*]] = pe.skew %[[P]] dim(4)
// CHECK-NEXT:    %[[UW:.*]] = pe.cayley %[[W]], %[[S]] : tensor<6x4xf32>, tensor<4x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT:    %[[Y:.*]] = pe.linear %[[H]], %[[UW]] : tensor<?x5x6xf32>, tensor<6x4xf32> -> tensor<?x5x4xf32>
// CHECK-NEXT:    %[[R:.*]] = pe.rope %[[Y]], %[[POS]], %[[F]] mode(seq)
// CHECK-NEXT:    return %[[R]]
pe.parameter @wq : tensor<6x4xf32> {init = "zeros"}
func.func @string_order(%h: tensor<?x5x6xf32>, %pos: tensor<5x1xf32>, %f: tensor<2x1xf32>, %p: tensor<6xf32>) -> tensor<?x5x4xf32> {
  %w = pe.get_param @wq : tensor<6x4xf32>
  %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  // The remark is on the new projection, at the linear layer's location.
  // expected-remark @+1 {{[pe-fold-transform] folded the Cayley transform into the weights @wq of the linear layer (U applied to W once per step, not to every token) (forward per example: 603 FLOP, 520 B -> 667 FLOP, 552 B)}}
  %y = pe.linear %h, %w : tensor<?x5x6xf32>, tensor<6x4xf32> -> tensor<?x5x4xf32>
  %c = pe.cayley %y, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %r = pe.rope %c, %pos, %f mode(seq) : tensor<?x5x4xf32>, tensor<5x1xf32>, tensor<2x1xf32> -> tensor<?x5x4xf32>
  return %r : tensor<?x5x4xf32>
}

// -----

// With a bias, on a rank-2 activation, and S defined after the projection.
// CHECK-LABEL: func.func @with_bias(
// CHECK-SAME:    %[[H:[^:]*]]: tensor<?x6xf32>, %[[W:[^:]*]]: tensor<6x4xf32>, %[[B:[^:]*]]: tensor<4xf32>, %[[P:[^:]*]]: tensor<6xf32>)
// CHECK-NEXT:    %[[S:.*]] = pe.skew %[[P]] dim(4)
// CHECK-NEXT:    %[[UW:.*]] = pe.cayley %[[W]], %[[S]] : tensor<6x4xf32>, tensor<4x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT:    %[[UB:.*]] = pe.cayley %[[B]], %[[S]] : tensor<4xf32>, tensor<4x4xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[Y:.*]] = pe.linear %[[H]], %[[UW]], %[[UB]] : tensor<?x6xf32>, tensor<6x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @with_bias(%h: tensor<?x6xf32>, %w: tensor<6x4xf32>, %b: tensor<4xf32>, %p: tensor<6xf32>) -> tensor<?x4xf32> {
  // expected-remark @+1 {{[pe-fold-transform] folded the Cayley transform into the weights of the linear layer}}
  %y = pe.linear %h, %w, %b : tensor<?x6xf32>, tensor<6x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %c = pe.cayley %y, %s : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
  return %c : tensor<?x4xf32>
}

// -----

// The projection is also used untransformed (here as V): no fold.
// CHECK-LABEL: func.func @projection_used_twice(
// CHECK:         %[[Y:.*]] = pe.linear
// CHECK-NEXT:    %[[C:.*]] = pe.cayley %[[Y]]
// CHECK-NEXT:    pe.attention %[[C]], %[[C]], %[[Y]]
func.func @projection_used_twice(%h: tensor<?x5x6xf32>, %w: tensor<6x4xf32>, %p: tensor<6xf32>) -> tensor<?x5x4xf32> {
  %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %y = pe.linear %h, %w : tensor<?x5x6xf32>, tensor<6x4xf32> -> tensor<?x5x4xf32>
  %c = pe.cayley %y, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %a = pe.attention %c, %c, %y heads(1) scale(5.000000e-01) mask(none) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %a : tensor<?x5x4xf32>
}

// -----

// RoPE first (vit_cayley's order): the transform is not of a linear layer.
// CHECK-LABEL: func.func @rope_first(
// CHECK:         pe.linear
// CHECK-NEXT:    pe.rope
// CHECK-NEXT:    pe.cayley
func.func @rope_first(%h: tensor<?x5x6xf32>, %w: tensor<6x4xf32>, %pos: tensor<5x1xf32>, %f: tensor<2x1xf32>, %p: tensor<6xf32>) -> tensor<?x5x4xf32> {
  %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %y = pe.linear %h, %w : tensor<?x5x6xf32>, tensor<6x4xf32> -> tensor<?x5x4xf32>
  %r = pe.rope %y, %pos, %f mode(seq) : tensor<?x5x4xf32>, tensor<5x1xf32>, tensor<2x1xf32> -> tensor<?x5x4xf32>
  %c = pe.cayley %r, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  return %c : tensor<?x5x4xf32>
}
