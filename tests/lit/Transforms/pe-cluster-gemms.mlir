// pe-cluster-gemms (a default pass of --target=cuda only): a pe.linear
// without bias, pe.linear_grad_input or pe.linear_grad_weight moves next to a
// twin (same op, attributes and types, reading a value in common): up after
// the nearest earlier twin when its operands are defined before it, else
// down before the nearest later twin when its results are not used before
// or by it. Pure reordering; the CUDA step program runs each run of twins
// as one cuBLAS call.
// RUN: string-opt --pe-cluster-gemms -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-cluster-gemms=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// A block's backward: dWv and dWk are together; dWq (reading x and dq, both
// defined before dWk) moves up after dWk, past the sum of input gradients.
// CHECK-LABEL: func.func @weight_gradients(
// CHECK:         %[[DWV:.*]] = pe.linear_grad_weight %arg0, %arg1
// CHECK-NEXT:    %[[DWK:.*]] = pe.linear_grad_weight %arg0, %arg2
// CHECK-NEXT:    %[[DWQ:.*]] = pe.linear_grad_weight %arg0, %arg3
// CHECK-NEXT:    pe.linear_grad_input_acc
// EXPLAIN: remark: [pe-cluster-gemms] moved up next to a GEMM of the same shape reading the same value
func.func @weight_gradients(%x: tensor<?x5x4xf32>, %dv: tensor<?x5x4xf32>, %dk: tensor<?x5x4xf32>, %dq: tensor<?x5x4xf32>, %p: tensor<?x5x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<?x5x4xf32>) {
  %dwv = pe.linear_grad_weight %x, %dv : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<4x4xf32>
  %dwk = pe.linear_grad_weight %x, %dk : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<4x4xf32>
  %acc = pe.linear_grad_input_acc %p, %dk, %w : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %dwq = pe.linear_grad_weight %x, %dq : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<4x4xf32>
  return %dwv, %dwk, %dwq, %acc : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<?x5x4xf32>
}

// -----

// vit_cayley's attention inputs: Q, K, V read h; Q' and K' apply U to
// functions of Q and K. K and V move up after Q; Q' (used only after K')
// moves down before K'. K' reads g(K) and stays.
// CHECK-LABEL: func.func @projections(
// CHECK:         %[[Q:.*]] = pe.linear %arg0, %arg1 :
// CHECK-NEXT:    %[[K:.*]] = pe.linear %arg0, %arg2 :
// CHECK-NEXT:    %[[V:.*]] = pe.linear %arg0, %arg3 :
// CHECK-NEXT:    %[[FQ:.*]] = pe.relu %[[Q]]
// CHECK-NEXT:    %[[FK:.*]] = pe.relu %[[K]]
// CHECK-NEXT:    %[[Q2:.*]] = pe.linear %[[FQ]], %arg4 :
// CHECK-NEXT:    %[[K2:.*]] = pe.linear %[[FK]], %arg4 :
// CHECK-NEXT:    pe.add %[[Q2]], %[[K2]]
// EXPLAIN: remark: [pe-cluster-gemms] moved up next to a GEMM
// EXPLAIN: remark: [pe-cluster-gemms] moved up next to a GEMM
// EXPLAIN: remark: [pe-cluster-gemms] moved down next to a GEMM
func.func @projections(%h: tensor<?x5x4xf32>, %wq: tensor<4x4xf32>, %wk: tensor<4x4xf32>, %wv: tensor<4x4xf32>, %u: tensor<4x4xf32>) -> (tensor<?x5x4xf32>, tensor<?x5x4xf32>) {
  %q = pe.linear %h, %wq : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %fq = pe.relu %q : tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  %q2 = pe.linear %fq, %u : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %k = pe.linear %h, %wk : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %fk = pe.relu %k : tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  %k2 = pe.linear %fk, %u : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %v = pe.linear %h, %wv : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %s = pe.add %q2, %k2 : tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %s, %v : tensor<?x5x4xf32>, tensor<?x5x4xf32>
}

// -----

// What stays: a twin reading the other's result (a chain), a linear with a
// bias, and ops of other shapes or reading nothing in common.
// CHECK-LABEL: func.func @stays(
// CHECK:         %[[A:.*]] = pe.linear %arg0, %arg1 :
// CHECK-NEXT:    %[[R:.*]] = pe.relu %[[A]]
// CHECK-NEXT:    %[[B:.*]] = pe.linear %[[R]], %arg1 :
// CHECK-NEXT:    pe.relu
// CHECK-NEXT:    pe.linear %arg0, %arg1, %arg2 :
// CHECK-NEXT:    pe.relu
// CHECK-NEXT:    pe.linear %arg0, %arg1, %arg2 :
// CHECK-NEXT:    pe.relu
// CHECK-NEXT:    pe.linear %arg3, %arg4 :
// EXPLAIN-NOT: remark
func.func @stays(%x: tensor<?x4xf32>, %w: tensor<4x4xf32>, %b: tensor<4xf32>, %y: tensor<?x4xf32>, %w2: tensor<4x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) {
  %a = pe.linear %x, %w : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
  %r = pe.relu %a : tensor<?x4xf32> -> tensor<?x4xf32>
  %c = pe.linear %r, %w : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
  %r2 = pe.relu %c : tensor<?x4xf32> -> tensor<?x4xf32>
  %d = pe.linear %x, %w, %b : tensor<?x4xf32>, tensor<4x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %r3 = pe.relu %d : tensor<?x4xf32> -> tensor<?x4xf32>
  %e = pe.linear %x, %w, %b : tensor<?x4xf32>, tensor<4x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %r4 = pe.relu %e : tensor<?x4xf32> -> tensor<?x4xf32>
  %f = pe.linear %y, %w2 : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
  return %r2, %r3, %r4, %f, %a : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>
}
