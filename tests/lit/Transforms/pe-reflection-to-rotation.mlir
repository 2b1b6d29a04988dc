// pe-reflection-to-rotation: householder(x, pos, f1, f2) becomes
// rope(x, pos, 2 (f2 - f1)), mode mixed for 2D positions and seq for 1D; Q
// and K with the same f1, f2 share the derived frequencies.
// RUN: string-opt --pe-reflection-to-rotation -split-input-file %s | FileCheck %s
// RUN: string-opt --pass-pipeline='builtin.module(pe-reflection-to-rotation{explain=true})' -split-input-file -verify-diagnostics %s -o /dev/null

// Both Q and K, 2D positions: one sub and one scale, after the later of
// f1 and f2, shared by both rope ops.
// CHECK-LABEL: func.func @grid(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<?x5x8xf32>, %[[K:[^:]*]]: tensor<?x5x8xf32>, %[[POS:[^:]*]]: tensor<5x2xf32>)
// CHECK-NEXT:    %[[F1:.*]] = pe.get_param @f1
// CHECK-NEXT:    %[[F2:.*]] = pe.get_param @f2
// CHECK-NEXT:    %[[D:.*]] = pe.sub %[[F2]], %[[F1]] : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT:    %[[FREQS:.*]] = pe.scale %[[D]] factor(2.000000e+00) : tensor<4x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT:    %[[RQ:.*]] = pe.rope %[[Q]], %[[POS]], %[[FREQS]] mode(mixed) : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32> -> tensor<?x5x8xf32>
// CHECK-NEXT:    %[[RK:.*]] = pe.rope %[[K]], %[[POS]], %[[FREQS]] mode(mixed)
// CHECK-NEXT:    pe.attention %[[RQ]], %[[RK]]
// CHECK-NOT:     pe.householder
pe.parameter @f1 : tensor<4x2xf32> {init = "zeros"}
pe.parameter @f2 : tensor<4x2xf32> {init = "zeros"}
func.func @grid(%q: tensor<?x5x8xf32>, %k: tensor<?x5x8xf32>, %pos: tensor<5x2xf32>) -> tensor<?x5x8xf32> {
  %f1 = pe.get_param @f1 : tensor<4x2xf32>
  %f2 = pe.get_param @f2 : tensor<4x2xf32>
  // expected-remark @+1 {{[pe-reflection-to-rotation] two reflections per pair rewritten as the rotation by 2 (a2 - a1): RoPE with frequencies 2 (f2 - f1) (forward per example:}}
  %hq = pe.householder %q, %pos, %f1, %f2 : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<?x5x8xf32>
  // expected-remark @+1 {{RoPE with the shared frequencies 2 (f2 - f1)}}
  %hk = pe.householder %k, %pos, %f1, %f2 : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<?x5x8xf32>
  %a = pe.attention %hq, %hk, %k heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  return %a : tensor<?x5x8xf32>
}

// -----

// 1D positions give mode seq; tables that are block arguments put the
// derived frequencies at the start of the block.
// CHECK-LABEL: func.func @sequence(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<?x6x4xf32>, %[[POS:[^:]*]]: tensor<6x1xf32>, %[[F1:[^:]*]]: tensor<2x1xf32>, %[[F2:[^:]*]]: tensor<2x1xf32>)
// CHECK-NEXT:    %[[D:.*]] = pe.sub %[[F2]], %[[F1]]
// CHECK-NEXT:    %[[FREQS:.*]] = pe.scale %[[D]] factor(2.000000e+00)
// CHECK-NEXT:    %[[Y:.*]] = pe.relu %[[X]]
// CHECK-NEXT:    pe.rope %[[Y]], %[[POS]], %[[FREQS]] mode(seq) : tensor<?x6x4xf32>, tensor<6x1xf32>, tensor<2x1xf32> -> tensor<?x6x4xf32>
func.func @sequence(%x: tensor<?x6x4xf32>, %pos: tensor<6x1xf32>, %f1: tensor<2x1xf32>, %f2: tensor<2x1xf32>) -> tensor<?x6x4xf32> {
  %y = pe.relu %x : tensor<?x6x4xf32> -> tensor<?x6x4xf32>
  // expected-remark @+1 {{[pe-reflection-to-rotation]}}
  %h = pe.householder %y, %pos, %f1, %f2 : tensor<?x6x4xf32>, tensor<6x1xf32>, tensor<2x1xf32>, tensor<2x1xf32> -> tensor<?x6x4xf32>
  return %h : tensor<?x6x4xf32>
}

// -----

// Swapped tables are a different rotation (by 2 (a1 - a2)): their own
// frequencies, not the shared ones.
// CHECK-LABEL: func.func @swapped(
// CHECK-SAME:    %[[F1:[^:]*]]: tensor<2x1xf32>, %[[F2:[^:]*]]: tensor<2x1xf32>)
// CHECK-DAG:     %[[D21:.*]] = pe.sub %[[F2]], %[[F1]]
// CHECK-DAG:     %[[FA:.*]] = pe.scale %[[D21]]
// CHECK-DAG:     %[[D12:.*]] = pe.sub %[[F1]], %[[F2]]
// CHECK-DAG:     %[[FB:.*]] = pe.scale %[[D12]]
// CHECK:         pe.rope %{{.*}}, %{{.*}}, %[[FA]] mode(seq)
// CHECK-NEXT:    pe.rope %{{.*}}, %{{.*}}, %[[FB]] mode(seq)
func.func @swapped(%x: tensor<?x6x4xf32>, %pos: tensor<6x1xf32>, %f1: tensor<2x1xf32>, %f2: tensor<2x1xf32>) -> (tensor<?x6x4xf32>, tensor<?x6x4xf32>) {
  // expected-remark @+1 {{[pe-reflection-to-rotation]}}
  %a = pe.householder %x, %pos, %f1, %f2 : tensor<?x6x4xf32>, tensor<6x1xf32>, tensor<2x1xf32>, tensor<2x1xf32> -> tensor<?x6x4xf32>
  // expected-remark @+1 {{[pe-reflection-to-rotation]}}
  %b = pe.householder %x, %pos, %f2, %f1 : tensor<?x6x4xf32>, tensor<6x1xf32>, tensor<2x1xf32>, tensor<2x1xf32> -> tensor<?x6x4xf32>
  return %a, %b : tensor<?x6x4xf32>, tensor<?x6x4xf32>
}

// -----

// Nothing to rewrite: RoPE stays as it is.
// CHECK-LABEL: func.func @no_reflection(
// CHECK-NEXT:    pe.rope
// CHECK-NOT:     pe.sub
func.func @no_reflection(%x: tensor<?x6x4xf32>, %pos: tensor<6x1xf32>, %f: tensor<2x1xf32>) -> tensor<?x6x4xf32> {
  %r = pe.rope %x, %pos, %f mode(seq) : tensor<?x6x4xf32>, tensor<6x1xf32>, tensor<2x1xf32> -> tensor<?x6x4xf32>
  return %r : tensor<?x6x4xf32>
}
