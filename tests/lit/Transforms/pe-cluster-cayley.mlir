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
