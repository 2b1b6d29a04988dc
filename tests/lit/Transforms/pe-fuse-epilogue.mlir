// pe-fuse-epilogue: gelu(linear(x, w, b)) becomes linear_gelu(x, w, b), and
// add(r, linear(x, w, b)) (either order) becomes linear_residual(r, x, w,
// b), when the linear feeds nothing else and the add does not broadcast.
// RUN: string-opt --pe-fuse-epilogue -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-fuse-epilogue=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// An MLP block: both linears fuse, the second reading the first's activation.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<?x5x4xf32>, %[[W1:[^:]*]]: tensor<4x8xf32>, %[[B1:[^:]*]]: tensor<8xf32>, %[[W2:[^:]*]]: tensor<8x4xf32>, %[[B2:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[H:.*]], %[[PRE:.*]] = pe.linear_gelu %[[X]], %[[W1]], %[[B1]] approximate(true) : tensor<?x5x4xf32>, tensor<4x8xf32>, tensor<8xf32> -> (tensor<?x5x8xf32>, tensor<?x5x8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = pe.linear_residual %[[X]], %[[H]], %[[W2]], %[[B2]] : tensor<?x5x4xf32>, tensor<?x5x8xf32>, tensor<8x4xf32>, tensor<4xf32> -> tensor<?x5x4xf32>
// CHECK-NEXT:    return %[[Y]]
// EXPLAIN: remark: [pe-fuse-epilogue] fused the GELU into the dense layer's epilogue (forward per example:
// EXPLAIN: remark: [pe-fuse-epilogue] fused the residual add into the dense layer (the linear's result is never stored apart) (forward per example:
func.func @mlp(%x: tensor<?x5x4xf32>, %w1: tensor<4x8xf32>, %b1: tensor<8xf32>, %w2: tensor<8x4xf32>, %b2: tensor<4xf32>) -> tensor<?x5x4xf32> {
  %l1 = pe.linear %x, %w1, %b1 : tensor<?x5x4xf32>, tensor<4x8xf32>, tensor<8xf32> -> tensor<?x5x8xf32>
  %h = pe.gelu %l1 approximate(true) : tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  %l2 = pe.linear %h, %w2, %b2 : tensor<?x5x8xf32>, tensor<8x4xf32>, tensor<4xf32> -> tensor<?x5x4xf32>
  %y = pe.add %l2, %x : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %y : tensor<?x5x4xf32>
}

// -----

// No bias: still fused.
// CHECK-LABEL: func.func @no_bias(
// CHECK:         pe.linear_residual %arg0, %arg0, %arg1 : tensor<?x4xf32>, tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
// EXPLAIN: remark: [pe-fuse-epilogue] fused the residual add
func.func @no_bias(%x: tensor<?x4xf32>, %w: tensor<4x4xf32>) -> tensor<?x4xf32> {
  %l = pe.linear %x, %w : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
  %y = pe.add %x, %l : tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// Left alone: a linear read twice, a broadcasting add, a gelu of something
// else than a linear.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT:     pe.linear_gelu
// CHECK-NOT:     pe.linear_residual
// CHECK:         return
// EXPLAIN-NOT:   remark: [pe-fuse-epilogue]
func.func @left_alone(%x: tensor<?x5x4xf32>, %w: tensor<4x4xf32>, %t: tensor<5x4xf32>) -> (tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<5x4xf32>) {
  %l = pe.linear %x, %w : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %g = pe.gelu %l : tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  %r = pe.add %x, %l : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  %l2 = pe.linear %x, %w : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %b = pe.add %l2, %t : tensor<?x5x4xf32>, tensor<5x4xf32> -> tensor<?x5x4xf32>
  %l3 = pe.linear %t, %w : tensor<5x4xf32>, tensor<4x4xf32> -> tensor<5x4xf32>
  %bt = pe.add %x, %l3 : tensor<?x5x4xf32>, tensor<5x4xf32> -> tensor<?x5x4xf32>
  %g2 = pe.gelu %x : tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %r, %b, %bt, %l3 : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<5x4xf32>
}
