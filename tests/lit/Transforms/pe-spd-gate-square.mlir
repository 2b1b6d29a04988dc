// pe-spd-gate-square: attention(spd_gate(q, g), spd_gate(k, g), v) becomes
// attention(spd_gate(q, scale(g, 2)), k, v). The cases after the first two
// must be left alone.
// RUN: string-opt --pe-spd-gate-square -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-spd-gate-square=explain=true -split-input-file -verify-diagnostics %s -o /dev/null

// CHECK-LABEL: func.func @fires(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<?x8x8xf32>, %[[K:[^:]*]]: tensor<?x8x8xf32>, %[[V:[^:]*]]: tensor<?x8x8xf32>, %[[G:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[G2:.*]] = pe.scale %[[G]] factor(2.000000e+00) : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT:    %[[QG:.*]] = pe.spd_gate %[[Q]], %[[G2]] : tensor<?x8x8xf32>, tensor<8xf32> -> tensor<?x8x8xf32>
// CHECK-NEXT:    %[[A:.*]] = pe.attention %[[QG]], %[[K]], %[[V]] heads(2) scale(5.000000e-01) mask(causal)
// CHECK-NEXT:    return %[[A]]
func.func @fires(%q: tensor<?x8x8xf32>, %k: tensor<?x8x8xf32>, %v: tensor<?x8x8xf32>, %g: tensor<8xf32>) -> tensor<?x8x8xf32> {
  %qg = pe.spd_gate %q, %g : tensor<?x8x8xf32>, tensor<8xf32> -> tensor<?x8x8xf32>
  %kg = pe.spd_gate %k, %g : tensor<?x8x8xf32>, tensor<8xf32> -> tensor<?x8x8xf32>
  // expected-remark @+1 {{[pe-spd-gate-square] moved the SPD gate of K onto Q, squared (one gate instead of two) (forward per example: 384 FLOP, 1.09 KB -> 200 FLOP, 608 B)}}
  %a = pe.attention %qg, %kg, %v heads(2) scale(5.000000e-01) mask(causal) : tensor<?x8x8xf32>, tensor<?x8x8xf32>, tensor<?x8x8xf32> -> tensor<?x8x8xf32>
  return %a : tensor<?x8x8xf32>
}

// -----

// One gate feeding both Q and K (self-similarity): the same identity holds.
// CHECK-LABEL: func.func @same_gate(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<?x4x8xf32>, %[[V:[^:]*]]: tensor<?x4x8xf32>, %[[G:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[G2:.*]] = pe.scale %[[G]] factor(2.000000e+00)
// CHECK-NEXT:    %[[XG:.*]] = pe.spd_gate %[[X]], %[[G2]]
// CHECK-NEXT:    pe.attention %[[XG]], %[[X]], %[[V]] heads(1)
func.func @same_gate(%x: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>, %g: tensor<8xf32>) -> tensor<?x4x8xf32> {
  %xg = pe.spd_gate %x, %g : tensor<?x4x8xf32>, tensor<8xf32> -> tensor<?x4x8xf32>
  // expected-remark @+1 {{[pe-spd-gate-square] moved the SPD gate of K onto Q}}
  %a = pe.attention %xg, %xg, %v heads(1) scale(5.000000e-01) mask(none) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32> -> tensor<?x4x8xf32>
  return %a : tensor<?x4x8xf32>
}

// -----

// Different gammas: D1 D2 is not a square.
// CHECK-LABEL: func.func @different_gammas(
// CHECK-COUNT-2: pe.spd_gate
// CHECK-NOT:     pe.scale
func.func @different_gammas(%q: tensor<?x8x8xf32>, %k: tensor<?x8x8xf32>, %v: tensor<?x8x8xf32>, %g1: tensor<8xf32>, %g2: tensor<8xf32>) -> tensor<?x8x8xf32> {
  %qg = pe.spd_gate %q, %g1 : tensor<?x8x8xf32>, tensor<8xf32> -> tensor<?x8x8xf32>
  %kg = pe.spd_gate %k, %g2 : tensor<?x8x8xf32>, tensor<8xf32> -> tensor<?x8x8xf32>
  %a = pe.attention %qg, %kg, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x8x8xf32>, tensor<?x8x8xf32>, tensor<?x8x8xf32> -> tensor<?x8x8xf32>
  return %a : tensor<?x8x8xf32>
}

// -----

// The gated K is also returned: it is still needed, so nothing is saved.
// CHECK-LABEL: func.func @gated_key_used_elsewhere(
// CHECK-COUNT-2: pe.spd_gate
// CHECK-NOT:     pe.scale
func.func @gated_key_used_elsewhere(%q: tensor<?x8x8xf32>, %k: tensor<?x8x8xf32>, %v: tensor<?x8x8xf32>, %g: tensor<8xf32>) -> (tensor<?x8x8xf32>, tensor<?x8x8xf32>) {
  %qg = pe.spd_gate %q, %g : tensor<?x8x8xf32>, tensor<8xf32> -> tensor<?x8x8xf32>
  %kg = pe.spd_gate %k, %g : tensor<?x8x8xf32>, tensor<8xf32> -> tensor<?x8x8xf32>
  %a = pe.attention %qg, %kg, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x8x8xf32>, tensor<?x8x8xf32>, tensor<?x8x8xf32> -> tensor<?x8x8xf32>
  return %a, %kg : tensor<?x8x8xf32>, tensor<?x8x8xf32>
}

// -----

// The gated Q is also the value: moving the gate would change V.
// CHECK-LABEL: func.func @gated_query_is_value(
// CHECK-COUNT-2: pe.spd_gate
// CHECK-NOT:     pe.scale
func.func @gated_query_is_value(%q: tensor<?x8x8xf32>, %k: tensor<?x8x8xf32>, %g: tensor<8xf32>) -> tensor<?x8x8xf32> {
  %qg = pe.spd_gate %q, %g : tensor<?x8x8xf32>, tensor<8xf32> -> tensor<?x8x8xf32>
  %kg = pe.spd_gate %k, %g : tensor<?x8x8xf32>, tensor<8xf32> -> tensor<?x8x8xf32>
  %a = pe.attention %qg, %kg, %qg heads(2) scale(5.000000e-01) mask(none) : tensor<?x8x8xf32>, tensor<?x8x8xf32>, tensor<?x8x8xf32> -> tensor<?x8x8xf32>
  return %a : tensor<?x8x8xf32>
}

// -----

// A relative rotation between the gates: q^T D R D k != q^T D^2 R k.
// CHECK-LABEL: func.func @relative(
// CHECK-COUNT-2: pe.spd_gate
// CHECK-NOT:     pe.scale
func.func @relative(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>, %g: tensor<8xf32>, %rel: tensor<4x4x4x4xf32>) -> tensor<?x4x8xf32> {
  %qg = pe.spd_gate %q, %g : tensor<?x4x8xf32>, tensor<8xf32> -> tensor<?x4x8xf32>
  %kg = pe.spd_gate %k, %g : tensor<?x4x8xf32>, tensor<8xf32> -> tensor<?x4x8xf32>
  %a = pe.attention %qg, %kg, %v, %rel heads(2) scale(5.000000e-01) mask(none) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<4x4x4x4xf32> -> tensor<?x4x8xf32>
  return %a : tensor<?x4x8xf32>
}

// -----

// A per-position gate [T, D]: query i and key j get different gates.
// CHECK-LABEL: func.func @per_position(
// CHECK-COUNT-2: pe.spd_gate
// CHECK-NOT:     pe.scale
func.func @per_position(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>, %g: tensor<4x8xf32>) -> tensor<?x4x8xf32> {
  %qg = pe.spd_gate %q, %g : tensor<?x4x8xf32>, tensor<4x8xf32> -> tensor<?x4x8xf32>
  %kg = pe.spd_gate %k, %g : tensor<?x4x8xf32>, tensor<4x8xf32> -> tensor<?x4x8xf32>
  %a = pe.attention %qg, %kg, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32> -> tensor<?x4x8xf32>
  return %a : tensor<?x4x8xf32>
}

// -----

// Only K is gated.
// CHECK-LABEL: func.func @one_side(
// CHECK:         pe.spd_gate
// CHECK-NOT:     pe.scale
func.func @one_side(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>, %g: tensor<8xf32>) -> tensor<?x4x8xf32> {
  %kg = pe.spd_gate %k, %g : tensor<?x4x8xf32>, tensor<8xf32> -> tensor<?x4x8xf32>
  %a = pe.attention %q, %kg, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32> -> tensor<?x4x8xf32>
  return %a : tensor<?x4x8xf32>
}
