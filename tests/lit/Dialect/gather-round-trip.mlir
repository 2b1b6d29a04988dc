// The gather ops (PEGatherOps.td) survive print -> parse -> print, in their
// custom form and in the generic form.
// RUN: string-opt %s | string-opt | FileCheck %s
// RUN: string-opt %s -mlir-print-op-generic | string-opt | FileCheck %s

// CHECK-LABEL: func.func @gathers(
// CHECK: pe.skip_gather %{{.*}} heads(4) skip_base(1) : tensor<?x64x64xf32> -> tensor<?x64x64xf32>
// CHECK: pe.skip_gather_grad %{{.*}} heads(4) skip_base(1) : tensor<?x64x64xf32> -> tensor<?x64x64xf32>
// CHECK: pe.offset_table offsets([0, 0, 1, 0, -1, 0]) : tensor<3x2xf32>
// CHECK: pe.pair_gather %{{.*}} index([0, 1, 2, 0]) : tensor<3x16x16xf32> -> tensor<2x2x16x16xf32>
// CHECK: pe.pair_gather_grad %{{.*}} index([0, 1, 2, 0]) : tensor<2x2x16x16xf32> -> tensor<3x16x16xf32>
func.func @gathers(%v: tensor<?x64x64xf32>, %u: tensor<3x16x16xf32>, %dr: tensor<2x2x16x16xf32>) {
  %y = pe.skip_gather %v heads(4) skip_base(1) : tensor<?x64x64xf32> -> tensor<?x64x64xf32>
  %dv = pe.skip_gather_grad %y heads(4) skip_base(1) : tensor<?x64x64xf32> -> tensor<?x64x64xf32>
  %t = pe.offset_table offsets([0, 0, 1, 0, -1, 0]) : tensor<3x2xf32>
  %r = pe.pair_gather %u index([0, 1, 2, 0]) : tensor<3x16x16xf32> -> tensor<2x2x16x16xf32>
  %du = pe.pair_gather_grad %dr index([0, 1, 2, 0]) : tensor<2x2x16x16xf32> -> tensor<3x16x16xf32>
  return
}
