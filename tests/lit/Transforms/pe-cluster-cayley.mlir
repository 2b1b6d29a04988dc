// pe-cluster-cayley (a default pass of --target=cuda only): each
// pe.cayley_weight after the first of its type moves to just after the last
// one moved, its skew builder and parameter to just before the first; the
// CUDA step program runs the run as one launch (a kernel group). Pure
// reordering.
// RUN: string-opt --pe-cluster-cayley -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-cluster-cayley=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// Two layers as vit_cayley's: layer 1's parameter and skew move before layer
// 0's Cayley weight, its Cayley weight right after it.
// CHECK-LABEL: func.func @layers(
// CHECK:         %[[S0:.*]] = pe.skew %{{.*}} dim(4)
// CHECK-NEXT:    %[[P1:.*]] = pe.get_param @l1s
// CHECK-NEXT:    %[[S1:.*]] = pe.skew %[[P1]] dim(4)
// CHECK-NEXT:    %[[W0:.*]] = pe.cayley_weight %[[S0]]
// CHECK-NEXT:    %[[W1:.*]] = pe.cayley_weight %[[S1]]
// CHECK-NEXT:    pe.cayley %arg0, %[[S0]]
// EXPLAIN: remark: [pe-cluster-cayley] moved next to the Cayley weight of another layer
module {
pe.parameter @l0s : tensor<6xf32> {init = "zeros"}
pe.parameter @l1s : tensor<6xf32> {init = "zeros"}
func.func @layers(%x: tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %p0 = pe.get_param @l0s : tensor<6xf32>
  %s0 = pe.skew %p0 dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %w0 = pe.cayley_weight %s0 : tensor<4x4xf32> -> tensor<4x4xf32>
  %y0 = pe.cayley %x, %s0 : tensor<?x3x4xf32>, tensor<4x4xf32> -> tensor<?x3x4xf32>
  %p1 = pe.get_param @l1s : tensor<6xf32>
  %s1 = pe.skew %p1 dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %w1 = pe.cayley_weight %s1 : tensor<4x4xf32> -> tensor<4x4xf32>
  return %y0, %w0, %w1 : tensor<?x3x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
}

// -----

// A Cayley weight whose S depends on an earlier layer's output (not a skew
// of a parameter) stays where it is, and so does one reading the first.
// CHECK-LABEL: func.func @dependent(
// CHECK:         %[[W0:.*]] = pe.cayley_weight %arg0
// CHECK-NEXT:    %[[S1:.*]] = pe.add %[[W0]], %arg1
// CHECK-NEXT:    pe.cayley_weight %[[S1]]
// CHECK-NEXT:    %[[R:.*]] = pe.relu %arg1
// CHECK-NEXT:    pe.cayley_weight %[[R]]
func.func @dependent(%s: tensor<4x4xf32>, %t: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %w0 = pe.cayley_weight %s : tensor<4x4xf32> -> tensor<4x4xf32>
  %s1 = pe.add %w0, %t : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %w1 = pe.cayley_weight %s1 : tensor<4x4xf32> -> tensor<4x4xf32>
  %r = pe.relu %t : tensor<4x4xf32> -> tensor<4x4xf32>
  %w2 = pe.cayley_weight %r : tensor<4x4xf32> -> tensor<4x4xf32>
  return %w1, %w2 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// The backward: each layer's skew gradient moves to just before the last
// one of its kind (its dparams read only after it), so the layers' skew
// gradients are one run; the Cayley weight gradients stay where they are
// (layer 0's ds is read by its sparse skew gradient before layer 1's).
// A sparse skew gradient of another support is another kind: it stays.
// CHECK-LABEL: func.func @backward(
// CHECK:         %[[D0:.*]] = pe.cayley_weight_grad %arg0, %arg2
// CHECK-NEXT:    pe.sparse_skew_grad %[[D0]] dim(4) support([0, 2, 5])
// CHECK-NEXT:    pe.relu %arg3
// CHECK-NEXT:    %[[D1:.*]] = pe.cayley_weight_grad %arg1, %arg3
// CHECK-NEXT:    pe.sparse_skew_grad %[[D1]] dim(4) support([0, 1, 5])
// CHECK-NEXT:    %[[G0:.*]] = pe.skew_grad %[[D0]] dim(4)
// CHECK-NEXT:    %[[G1:.*]] = pe.skew_grad %[[D1]] dim(4)
// CHECK-NEXT:    pe.add %[[G0]], %[[G1]]
// EXPLAIN: remark: [pe-cluster-cayley] moved next to the skew gradient of another layer
func.func @backward(%s0: tensor<4x4xf32>, %s1: tensor<4x4xf32>, %dw0: tensor<4x4xf32>, %dw1: tensor<4x4xf32>) -> (tensor<6xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4x4xf32>) {
  %d0 = pe.cayley_weight_grad %s0, %dw0 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %g0 = pe.skew_grad %d0 dim(4) : tensor<4x4xf32> -> tensor<6xf32>
  %q0 = pe.sparse_skew_grad %d0 dim(4) support([0, 2, 5]) : tensor<4x4xf32> -> tensor<3xf32>
  %r = pe.relu %dw1 : tensor<4x4xf32> -> tensor<4x4xf32>
  %d1 = pe.cayley_weight_grad %s1, %dw1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %q1 = pe.sparse_skew_grad %d1 dim(4) support([0, 1, 5]) : tensor<4x4xf32> -> tensor<3xf32>
  %g1 = pe.skew_grad %d1 dim(4) : tensor<4x4xf32> -> tensor<6xf32>
  %sum = pe.add %g0, %g1 : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
  return %sum, %q0, %q1, %r : tensor<6xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4x4xf32>
}

// -----

// A skew gradient read before the last of its kind stays where it is.
// CHECK-LABEL: func.func @readEarly(
// CHECK:         %[[G0:.*]] = pe.skew_grad %arg0 dim(4)
// CHECK-NEXT:    %[[N:.*]] = pe.relu %[[G0]]
// CHECK-NEXT:    pe.skew_grad %arg1 dim(4)
func.func @readEarly(%d0: tensor<4x4xf32>, %d1: tensor<4x4xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
  %g0 = pe.skew_grad %d0 dim(4) : tensor<4x4xf32> -> tensor<6xf32>
  %n = pe.relu %g0 : tensor<6xf32> -> tensor<6xf32>
  %g1 = pe.skew_grad %d1 dim(4) : tensor<4x4xf32> -> tensor<6xf32>
  return %n, %g1 : tensor<6xf32>, tensor<6xf32>
}

// -----

// Then each Cayley weight gradient moves to just before the last of its
// kind when its ds is read only after it (by its skew gradient, moved to the
// end): the layers' Cayley weight gradients are one run, whose first
// launches (M from each W) the CUDA step program runs as one.
// CHECK-LABEL: func.func @weightGradients(
// CHECK:         pe.relu %arg3
// CHECK-NEXT:    %[[D0:.*]] = pe.cayley_weight_grad %arg0, %arg2 weight %arg4
// CHECK-NEXT:    %[[D1:.*]] = pe.cayley_weight_grad %arg1, %arg3 weight %arg5
// CHECK-NEXT:    %[[G0:.*]] = pe.skew_grad %[[D0]] dim(4)
// CHECK-NEXT:    %[[G1:.*]] = pe.skew_grad %[[D1]] dim(4)
// CHECK-NEXT:    pe.add %[[G0]], %[[G1]]
// EXPLAIN: remark: [pe-cluster-cayley] moved next to the Cayley weight gradient of another layer
func.func @weightGradients(%s0: tensor<4x4xf32>, %s1: tensor<4x4xf32>, %dw0: tensor<4x4xf32>, %dw1: tensor<4x4xf32>, %w0: tensor<4x4xf32>, %w1: tensor<4x4xf32>) -> (tensor<6xf32>, tensor<4x4xf32>) {
  %d0 = pe.cayley_weight_grad %s0, %dw0 weight %w0 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %g0 = pe.skew_grad %d0 dim(4) : tensor<4x4xf32> -> tensor<6xf32>
  %r = pe.relu %dw1 : tensor<4x4xf32> -> tensor<4x4xf32>
  %d1 = pe.cayley_weight_grad %s1, %dw1 weight %w1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %g1 = pe.skew_grad %d1 dim(4) : tensor<4x4xf32> -> tensor<6xf32>
  %sum = pe.add %g0, %g1 : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
  return %sum, %r : tensor<6xf32>, tensor<4x4xf32>
}

// -----

// vit_string's folded weights (pe-fold-transform's W_Q U, W_K U): after the
// Cayley weights, layer 1's products (and their parameters) move next to
// layer 0's, one run of four. A product of other weights stays.
// CHECK-LABEL: func.func @foldedWeights(
// CHECK:         %[[U0:.*]] = pe.cayley_weight %[[S0:.*]] :
// CHECK-NEXT:    %[[U1:.*]] = pe.cayley_weight
// CHECK:         %[[Q0:.*]] = pe.linear %{{.*}}, %[[U0]] :
// CHECK-NEXT:    %[[K0:.*]] = pe.linear %{{.*}}, %[[U0]] :
// CHECK-NEXT:    %[[Q1:.*]] = pe.linear %{{.*}}, %[[U1]] :
// CHECK-NEXT:    %[[K1:.*]] = pe.linear %{{.*}}, %[[U1]] :
// CHECK-NEXT:    pe.linear %arg0, %[[Q0]]
// CHECK-NEXT:    pe.linear %arg0, %[[K0]]
// CHECK-NEXT:    pe.relu %{{.*}} : tensor<?x3x4xf32>
// CHECK-NEXT:    %[[R:.*]] = pe.relu %[[S0]]
// CHECK-NEXT:    %[[F:.*]] = pe.linear %{{.*}}, %[[R]] : tensor<4x4xf32>
// CHECK-NEXT:    pe.linear %{{.*}}, %[[F]]
// CHECK:         pe.linear %{{.*}}, %[[Q1]]
// CHECK-NEXT:    pe.linear %{{.*}}, %[[K1]]
// EXPLAIN: remark: [pe-cluster-cayley] moved next to the folded weight of another layer
module {
pe.parameter @q0 : tensor<4x4xf32> {init = "zeros"}
pe.parameter @k0 : tensor<4x4xf32> {init = "zeros"}
pe.parameter @q1 : tensor<4x4xf32> {init = "zeros"}
pe.parameter @k1 : tensor<4x4xf32> {init = "zeros"}
func.func @foldedWeights(%x: tensor<?x3x4xf32>, %s0: tensor<4x4xf32>, %s1: tensor<4x4xf32>) -> (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>) {
  %u0 = pe.cayley_weight %s0 : tensor<4x4xf32> -> tensor<4x4xf32>
  %u1 = pe.cayley_weight %s1 : tensor<4x4xf32> -> tensor<4x4xf32>
  %wq0 = pe.get_param @q0 : tensor<4x4xf32>
  %wk0 = pe.get_param @k0 : tensor<4x4xf32>
  %fq0 = pe.linear %wq0, %u0 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %fk0 = pe.linear %wk0, %u0 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %q0 = pe.linear %x, %fq0 : tensor<?x3x4xf32>, tensor<4x4xf32> -> tensor<?x3x4xf32>
  %k0 = pe.linear %x, %fk0 : tensor<?x3x4xf32>, tensor<4x4xf32> -> tensor<?x3x4xf32>
  %h = pe.relu %q0 : tensor<?x3x4xf32> -> tensor<?x3x4xf32>
  %r = pe.relu %s0 : tensor<4x4xf32> -> tensor<4x4xf32>
  %fr = pe.linear %wq0, %r : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %v = pe.linear %h, %fr : tensor<?x3x4xf32>, tensor<4x4xf32> -> tensor<?x3x4xf32>
  %wq1 = pe.get_param @q1 : tensor<4x4xf32>
  %wk1 = pe.get_param @k1 : tensor<4x4xf32>
  %fq1 = pe.linear %wq1, %u1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %fk1 = pe.linear %wk1, %u1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %q1 = pe.linear %h, %fq1 : tensor<?x3x4xf32>, tensor<4x4xf32> -> tensor<?x3x4xf32>
  %k1 = pe.linear %h, %fk1 : tensor<?x3x4xf32>, tensor<4x4xf32> -> tensor<?x3x4xf32>
  return %k0, %v, %q1, %k1, %h : tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>
}
}

// -----

// Their gradients, consumers first: each layer's sum W_Q^T dW_Q' + W_K^T
// dW_K' (read by its Cayley weight gradient, at the end), the products it
// sums, and the parameters' gradients dW' U^T sink to just before the last
// of their kind: one run each. A sum of batch-sized products stays.
// CHECK-LABEL: func.func @foldedGradients(
// CHECK:         %[[U0:.*]] = pe.cayley_weight %arg8
// CHECK-NEXT:    %[[U1:.*]] = pe.cayley_weight %arg9
// CHECK-NEXT:    pe.relu %arg0
// CHECK-NEXT:    pe.linear_grad_weight %{{.*}}, %arg1
// CHECK-NEXT:    pe.linear_grad_weight %{{.*}}, %arg2
// CHECK-NEXT:    pe.add
// CHECK-NEXT:    %[[I0:.*]] = pe.linear_grad_input %arg3, %[[U0]] :
// CHECK-NEXT:    %[[I1:.*]] = pe.linear_grad_input %arg4, %[[U1]] :
// CHECK-NEXT:    %[[P0:.*]] = pe.linear_grad_weight %arg6, %arg3 :
// CHECK-NEXT:    %[[E0:.*]] = pe.linear_grad_weight %arg6, %arg5 :
// CHECK-NEXT:    %[[P1:.*]] = pe.linear_grad_weight %arg7, %arg4 :
// CHECK-NEXT:    %[[E1:.*]] = pe.linear_grad_weight %arg7, %arg5 :
// CHECK-NEXT:    %[[A0:.*]] = pe.add %[[P0]], %[[E0]] :
// CHECK-NEXT:    %[[A1:.*]] = pe.add %[[P1]], %[[E1]] :
// CHECK-NEXT:    pe.cayley_weight_grad %arg8, %[[A0]] weight %[[U0]]
// CHECK-NEXT:    pe.cayley_weight_grad %arg9, %[[A1]] weight %[[U1]]
// EXPLAIN: remark: [pe-cluster-cayley] moved next to the folded weight gradient of another layer
func.func @foldedGradients(%x: tensor<?x3x4xf32>, %dy0: tensor<?x3x4xf32>, %dy1: tensor<?x3x4xf32>, %dw0: tensor<4x4xf32>, %dw1: tensor<4x4xf32>, %dv0: tensor<4x4xf32>, %w0: tensor<4x4xf32>, %w1: tensor<4x4xf32>, %s0: tensor<4x4xf32>, %s1: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<?x3x4xf32>) {
  %u0 = pe.cayley_weight %s0 : tensor<4x4xf32> -> tensor<4x4xf32>
  %u1 = pe.cayley_weight %s1 : tensor<4x4xf32> -> tensor<4x4xf32>
  %i0 = pe.linear_grad_input %dw0, %u0 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %p0 = pe.linear_grad_weight %w0, %dw0 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %e0 = pe.linear_grad_weight %w0, %dv0 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %a0 = pe.add %p0, %e0 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %r = pe.relu %x : tensor<?x3x4xf32> -> tensor<?x3x4xf32>
  %b0 = pe.linear_grad_weight %r, %dy0 : tensor<?x3x4xf32>, tensor<?x3x4xf32> -> tensor<4x4xf32>
  %b1 = pe.linear_grad_weight %r, %dy1 : tensor<?x3x4xf32>, tensor<?x3x4xf32> -> tensor<4x4xf32>
  %c = pe.add %b0, %b1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %i1 = pe.linear_grad_input %dw1, %u1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %p1 = pe.linear_grad_weight %w1, %dw1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %e1 = pe.linear_grad_weight %w1, %dv0 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %a1 = pe.add %p1, %e1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %g0 = pe.cayley_weight_grad %s0, %a0 weight %u0 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %g1 = pe.cayley_weight_grad %s1, %a1 weight %u1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %g0, %g1, %i0, %i1, %c, %r : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<?x3x4xf32>
}
