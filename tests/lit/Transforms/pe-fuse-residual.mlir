// pe-fuse-residual: add(r, linear(x, w, b)) (either order) becomes
// linear_residual(r, x, w, b) when the linear feeds nothing else and the add
// does not broadcast; unlike pe-fuse-epilogue, a gelu keeps its own op. And
// add(p, linear_grad_input(dy, w)) becomes linear_grad_input_acc(p, dy, w)
// on the same conditions: the backward's sums of input gradients; and
// add(p, layer_norm_grad(x, g, dy).dx) becomes layer_norm_grad_acc(p, x, g,
// dy) when dgamma and dbeta are read only after the add: the residual
// stream's sums.
// RUN: string-opt --pe-fuse-residual -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-fuse-residual=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// An MLP block: the second linear and the add fuse; the first linear and
// its gelu stay.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<?x5x4xf32>, %[[W1:[^:]*]]: tensor<4x8xf32>, %[[B1:[^:]*]]: tensor<8xf32>, %[[W2:[^:]*]]: tensor<8x4xf32>, %[[B2:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[L1:.*]] = pe.linear %[[X]], %[[W1]], %[[B1]]
// CHECK-NEXT:    %[[H:.*]] = pe.gelu %[[L1]]
// CHECK-NEXT:    %[[Y:.*]] = pe.linear_residual %[[X]], %[[H]], %[[W2]], %[[B2]] : tensor<?x5x4xf32>, tensor<?x5x8xf32>, tensor<8x4xf32>, tensor<4xf32> -> tensor<?x5x4xf32>
// CHECK-NEXT:    return %[[Y]]
// EXPLAIN-NOT: fused the GELU
// EXPLAIN: remark: [pe-fuse-residual] fused the residual add into the dense layer (the linear's result is never stored apart) (forward per example:
func.func @mlp(%x: tensor<?x5x4xf32>, %w1: tensor<4x8xf32>, %b1: tensor<8xf32>, %w2: tensor<8x4xf32>, %b2: tensor<4xf32>) -> tensor<?x5x4xf32> {
  %l1 = pe.linear %x, %w1, %b1 : tensor<?x5x4xf32>, tensor<4x8xf32>, tensor<8xf32> -> tensor<?x5x8xf32>
  %h = pe.gelu %l1 approximate(true) : tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  %l2 = pe.linear %h, %w2, %b2 : tensor<?x5x8xf32>, tensor<8x4xf32>, tensor<4xf32> -> tensor<?x5x4xf32>
  %y = pe.add %l2, %x : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %y : tensor<?x5x4xf32>
}

// -----

// No bias: still fused, the residual first whichever side of the add it was.
// CHECK-LABEL: func.func @no_bias(
// CHECK:         pe.linear_residual %arg0, %arg0, %arg1 : tensor<?x4xf32>, tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
// EXPLAIN: remark: [pe-fuse-residual] fused the residual add
func.func @no_bias(%x: tensor<?x4xf32>, %w: tensor<4x4xf32>) -> tensor<?x4xf32> {
  %l = pe.linear %x, %w : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
  %y = pe.add %x, %l : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// Left alone: a linear read twice, a broadcasting add either way round.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT:     pe.linear_residual
// CHECK:         return
// EXPLAIN-NOT:   remark: [pe-fuse-residual]
func.func @left_alone(%x: tensor<?x5x4xf32>, %w: tensor<4x4xf32>, %t: tensor<5x4xf32>) -> (tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>) {
  %l = pe.linear %x, %w : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %r = pe.add %x, %l : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  %l2 = pe.linear %x, %w : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %b = pe.add %l2, %t : tensor<?x5x4xf32>, tensor<5x4xf32> -> tensor<?x5x4xf32>
  %l3 = pe.linear %t, %w : tensor<5x4xf32>, tensor<4x4xf32> -> tensor<5x4xf32>
  %bt = pe.add %x, %l3 : tensor<?x5x4xf32>, tensor<5x4xf32> -> tensor<?x5x4xf32>
  return %r, %b, %bt, %l : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>
}

// -----

// The input gradient of an activation read by three dense layers (Q, K and
// V), as pe-autodiff sums it: ((gv + gk) + gq). The first product stays,
// the other two accumulate onto the sum so far.
// CHECK-LABEL: func.func @gradient_sum(
// CHECK-SAME:    %[[DQ:[^:]*]]: tensor<?x5x4xf32>, %[[DK:[^:]*]]: tensor<?x5x4xf32>, %[[DV:[^:]*]]: tensor<?x5x4xf32>, %[[WQ:[^:]*]]: tensor<8x4xf32>, %[[WK:[^:]*]]: tensor<8x4xf32>, %[[WV:[^:]*]]: tensor<8x4xf32>)
// CHECK-NEXT:    %[[GV:.*]] = pe.linear_grad_input %[[DV]], %[[WV]]
// CHECK-NEXT:    %[[S:.*]] = pe.linear_grad_input_acc %[[GV]], %[[DK]], %[[WK]] : tensor<?x5x8xf32>, tensor<?x5x4xf32>, tensor<8x4xf32> -> tensor<?x5x8xf32>
// CHECK-NEXT:    %[[T:.*]] = pe.linear_grad_input_acc %[[S]], %[[DQ]], %[[WQ]] : tensor<?x5x8xf32>, tensor<?x5x4xf32>, tensor<8x4xf32> -> tensor<?x5x8xf32>
// CHECK-NEXT:    return %[[T]]
// EXPLAIN: remark: [pe-fuse-residual] fused the sum of input gradients into the dense layer's backward (the input gradient is never stored apart) (forward per example:
// EXPLAIN: remark: [pe-fuse-residual] fused the sum of input gradients
func.func @gradient_sum(%dq: tensor<?x5x4xf32>, %dk: tensor<?x5x4xf32>, %dv: tensor<?x5x4xf32>, %wq: tensor<8x4xf32>, %wk: tensor<8x4xf32>, %wv: tensor<8x4xf32>) -> tensor<?x5x8xf32> {
  %gv = pe.linear_grad_input %dv, %wv : tensor<?x5x4xf32>, tensor<8x4xf32> -> tensor<?x5x8xf32>
  %gk = pe.linear_grad_input %dk, %wk : tensor<?x5x4xf32>, tensor<8x4xf32> -> tensor<?x5x8xf32>
  %s = pe.add %gv, %gk : tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  %gq = pe.linear_grad_input %dq, %wq : tensor<?x5x4xf32>, tensor<8x4xf32> -> tensor<?x5x8xf32>
  %t = pe.add %s, %gq : tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  return %t : tensor<?x5x8xf32>
}

// -----

// Left alone: an input gradient read twice, a broadcast prior.
// CHECK-LABEL: func.func @gradient_left_alone(
// CHECK-NOT:     pe.linear_grad_input_acc
// CHECK:         return
func.func @gradient_left_alone(%dy: tensor<?x5x4xf32>, %w: tensor<8x4xf32>, %t: tensor<5x8xf32>) -> (tensor<?x5x8xf32>, tensor<?x5x8xf32>) {
  %g = pe.linear_grad_input %dy, %w : tensor<?x5x4xf32>, tensor<8x4xf32> -> tensor<?x5x8xf32>
  %a = pe.add %g, %g : tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  %g2 = pe.linear_grad_input %dy, %w : tensor<?x5x4xf32>, tensor<8x4xf32> -> tensor<?x5x8xf32>
  %b = pe.add %g2, %t : tensor<?x5x8xf32>, tensor<5x8xf32> -> tensor<?x5x8xf32>
  return %a, %b : tensor<?x5x8xf32>, tensor<?x5x8xf32>
}

// -----

// The residual stream's gradient: the gradient through a pre-norm added to
// the one that skips it (either order). dgamma and dbeta keep their uses.
// CHECK-LABEL: func.func @norm_gradient_sum(
// CHECK-SAME:    %[[P:[^:]*]]: tensor<?x5x4xf32>, %[[X:[^:]*]]: tensor<?x5x4xf32>, %[[G:[^:]*]]: tensor<4xf32>, %[[DY:[^:]*]]: tensor<?x5x4xf32>)
// CHECK-NEXT:    %[[A:[^,]*]], %[[AG:[^,]*]], %[[AB:[^ ]*]] = pe.layer_norm_grad_acc %[[P]], %[[X]], %[[G]], %[[DY]] epsilon(1.000000e-03) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<4xf32>, tensor<?x5x4xf32> -> (tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    %[[B:[^,]*]], %[[BG:[^,]*]], %[[BB:[^ ]*]] = pe.layer_norm_grad_acc %[[A]], %[[X]], %[[G]], %[[DY]] :
// CHECK-NEXT:    %[[S:.*]] = pe.add %[[AG]], %[[BB]]
// CHECK-NEXT:    return %[[B]], %[[S]], %[[AB]], %[[BG]]
// EXPLAIN: remark: [pe-fuse-residual] fused the residual stream's gradient sum into the layer norm's backward (its input gradient is never stored apart) (forward per example:
// EXPLAIN: remark: [pe-fuse-residual] fused the residual stream's gradient sum
func.func @norm_gradient_sum(%p: tensor<?x5x4xf32>, %x: tensor<?x5x4xf32>, %g: tensor<4xf32>, %dy: tensor<?x5x4xf32>) -> (tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %dx, %dg, %db = pe.layer_norm_grad %x, %g, %dy epsilon(1.000000e-03) : tensor<?x5x4xf32>, tensor<4xf32>, tensor<?x5x4xf32> -> (tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %s = pe.add %p, %dx : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  %dx2, %dg2, %db2 = pe.layer_norm_grad %x, %g, %dy : tensor<?x5x4xf32>, tensor<4xf32>, tensor<?x5x4xf32> -> (tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %t = pe.add %dx2, %s : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  %sum = pe.add %dg, %db2 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %t, %sum, %db, %dg2 : tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Left alone: dx read twice, a broadcast prior, dgamma read before the add
// (the fused op, placed at the add, would come after that use), and an add
// of dgamma (not dx) to a prior of its type.
// CHECK-LABEL: func.func @norm_gradient_left_alone(
// CHECK-NOT:     pe.layer_norm_grad_acc
// CHECK:         return
// EXPLAIN-NOT:   remark: [pe-fuse-residual]
func.func @norm_gradient_left_alone(%x: tensor<?x5x4xf32>, %g: tensor<4xf32>, %dy: tensor<?x5x4xf32>, %t: tensor<5x4xf32>, %v: tensor<4xf32>) -> (tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %dx, %dg, %db = pe.layer_norm_grad %x, %g, %dy : tensor<?x5x4xf32>, tensor<4xf32>, tensor<?x5x4xf32> -> (tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %a = pe.add %dx, %dx : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  %dx2, %dg2, %db2 = pe.layer_norm_grad %x, %g, %dy : tensor<?x5x4xf32>, tensor<4xf32>, tensor<?x5x4xf32> -> (tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %b = pe.add %dx2, %t : tensor<?x5x4xf32>, tensor<5x4xf32> -> tensor<?x5x4xf32>
  %dx3, %dg3, %db3 = pe.layer_norm_grad %x, %g, %dy : tensor<?x5x4xf32>, tensor<4xf32>, tensor<?x5x4xf32> -> (tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %early = pe.add %dg3, %db3 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %c = pe.add %dy, %dx3 : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  %r:3 = pe.layer_norm_grad %v, %g, %v : tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %d = pe.add %v, %r#1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %e = pe.add %d, %r#0 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %a, %b, %c, %early, %e : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<4xf32>, tensor<4xf32>
}
