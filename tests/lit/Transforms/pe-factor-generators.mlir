// pe-factor-generators: relative attention with rel = generator_exp(
// relative_positions(pos), L) becomes attention of apply_rotation(q, R) and
// apply_rotation(k, R), R = generator_exp(pos, L). Exact with one skew
// generator (fires by default); K >= 2 generators only with approximate=true,
// which warns with the commutator bound; generators that are not built by
// pe.skew are never factored.
// RUN: string-opt --pe-factor-generators -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-factor-generators=approximate=true -split-input-file -verify-diagnostics %s | FileCheck %s --check-prefix=APPROX
// RUN: string-opt --pe-factor-generators=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// K = 1 (exact): the two attentions share one absolute table R [T, Dh, Dh]
// and the rotated k;
// the relative table and the relative positions are erased.
// CHECK-LABEL: func.func @one_generator(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<?x4x8xf32>, %[[K:[^:]*]]: tensor<?x4x8xf32>, %[[V:[^:]*]]: tensor<?x4x8xf32>
// CHECK:         %[[POS:.*]] = pe.seq_positions length(3) special(1) : tensor<4x1xf32>
// CHECK-NEXT:    %[[L:.*]] = pe.skew %{{.*}} dim(4) : tensor<1x6xf32> -> tensor<1x4x4xf32>
// CHECK-NEXT:    %[[R:.*]] = pe.generator_exp %[[POS]], %[[L]] : tensor<4x1xf32>, tensor<1x4x4xf32> -> tensor<4x4x4xf32>
// CHECK-NEXT:    %[[RQ:.*]] = pe.apply_rotation %[[Q]], %[[R]] heads(2)
// CHECK-NEXT:    %[[RK:.*]] = pe.apply_rotation %[[K]], %[[R]] heads(2)
// CHECK-NEXT:    %[[A:.*]] = pe.attention %[[RQ]], %[[RK]], %[[V]] heads(2) scale(5.000000e-01) mask(none) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32> -> tensor<?x4x8xf32>
// CHECK-NEXT:    %[[RA:.*]] = pe.apply_rotation %[[A]], %[[R]] heads(2)
// CHECK-NEXT:    %[[B:.*]] = pe.attention %[[RA]], %[[RK]], %[[V]] heads(2) scale(5.000000e-01) mask(causal)
// CHECK-NOT:     pe.relative_positions
// CHECK:         return %[[B]]
// EXPLAIN: remark: [pe-factor-generators] factored relative attention into absolute rotations R(p_t) of q and k (T instead of T*T matrix exponentials, no per-pair rotation) (forward per example:
// EXPLAIN: remark: [pe-factor-generators] factored relative attention
func.func @one_generator(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>, %g: tensor<1x6xf32>) -> tensor<?x4x8xf32> {
  %pos = pe.seq_positions length(3) special(1) : tensor<4x1xf32>
  %L = pe.skew %g dim(4) : tensor<1x6xf32> -> tensor<1x4x4xf32>
  %r = pe.relative_positions %pos : tensor<4x1xf32> -> tensor<4x4x1xf32>
  %R = pe.generator_exp %r, %L : tensor<4x4x1xf32>, tensor<1x4x4xf32> -> tensor<4x4x4x4xf32>
  %a = pe.attention %q, %k, %v, %R heads(2) scale(5.000000e-01) mask(none) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<4x4x4x4xf32> -> tensor<?x4x8xf32>
  %b = pe.attention %a, %k, %v, %R heads(2) scale(5.000000e-01) mask(causal) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<4x4x4x4xf32> -> tensor<?x4x8xf32>
  return %b : tensor<?x4x8xf32>
}

// -----

// K = 2 learned generators (vit_generators): left alone by default (with
// explain, a remark says why); with approximate=true factored, with a warning
// stating the bound: over a 2x2 grid max (1/2)|x_i y_j - y_i x_j| = 0.5,
// eps measured at run time by the model's commutator_norm.
// CHECK-LABEL: func.func @two_generators(
// CHECK-NOT:     pe.apply_rotation
// CHECK:         pe.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads(1)
// EXPLAIN: remark: [pe-factor-generators: not applied] 2 learned generators need not commute (exact only for K = 1); --approximate factors them within the commutator bound
// APPROX-LABEL: func.func @two_generators(
// APPROX:         %[[R:.*]] = pe.generator_exp %{{.*}}, %{{.*}} : tensor<5x2xf32>, tensor<2x4x4xf32> -> tensor<5x4x4xf32>
// APPROX:         pe.apply_rotation %{{.*}}, %[[R]] heads(1)
// APPROX:         pe.apply_rotation %{{.*}}, %[[R]] heads(1)
// APPROX:         pe.attention %{{.*}}, %{{.*}}, %{{.*}} heads(1) scale(5.000000e-01) mask(none) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
// APPROX-NOT:     pe.relative_positions
func.func @two_generators(%q: tensor<?x5x4xf32>, %k: tensor<?x5x4xf32>, %v: tensor<?x5x4xf32>, %g: tensor<2x6xf32>) -> (tensor<?x5x4xf32>, tensor<f32>) {
  %pos = pe.grid_positions rows(2) cols(2) special(1) : tensor<5x2xf32>
  %L = pe.skew %g dim(4) : tensor<2x6xf32> -> tensor<2x4x4xf32>
  %r = pe.relative_positions %pos : tensor<5x2xf32> -> tensor<5x5x2xf32>
  %R = pe.generator_exp %r, %L : tensor<5x5x2xf32>, tensor<2x4x4xf32> -> tensor<5x5x4x4xf32>
  // expected-warning @+1 {{pe-factor-generators: approximate rewrite (--approximate): K = 2 generators commute only approximately; for skew A = -p_i.L, B = p_j.L, ||exp(A+B) - exp(A)exp(B)||_F <= (1/2)||[A,B]||_F <= 0.5 * eps over these positions, eps = max_{a<b} ||[L_a, L_b]||_F (the learned value, unknown to the compiler: the model's pe.commutator_norm penalty measures it at run time)}}
  %a = pe.attention %q, %k, %v, %R heads(1) scale(5.000000e-01) mask(none) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<5x5x4x4xf32> -> tensor<?x5x4xf32>
  %c = pe.commutator_norm %L : tensor<2x4x4xf32> -> tensor<f32>
  return %a, %c : tensor<?x5x4xf32>, tensor<f32>
}

// -----

// Never factored: generators that are not built by pe.skew (R(p)^T =
// exp(-p.L) needs skew L), and a rel that is not generator_exp of relative
// positions.
// CHECK-LABEL: func.func @not_skew(
// CHECK-NOT:     pe.apply_rotation
// APPROX-LABEL: func.func @not_skew(
// APPROX-NOT:     pe.apply_rotation
// EXPLAIN-NOT: remark
func.func @not_skew(%q: tensor<?x3x4xf32>, %k: tensor<?x3x4xf32>, %v: tensor<?x3x4xf32>, %L: tensor<1x4x4xf32>, %rel: tensor<3x3x4x4xf32>) -> (tensor<?x3x4xf32>, tensor<?x3x4xf32>) {
  %pos = pe.seq_positions length(3) : tensor<3x1xf32>
  %r = pe.relative_positions %pos : tensor<3x1xf32> -> tensor<3x3x1xf32>
  %R = pe.generator_exp %r, %L : tensor<3x3x1xf32>, tensor<1x4x4xf32> -> tensor<3x3x4x4xf32>
  %a = pe.attention %q, %k, %v, %R heads(1) scale(5.000000e-01) mask(none) : tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<3x3x4x4xf32> -> tensor<?x3x4xf32>
  %b = pe.attention %q, %k, %v, %rel heads(1) scale(5.000000e-01) mask(none) : tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<3x3x4x4xf32> -> tensor<?x3x4xf32>
  return %a, %b : tensor<?x3x4xf32>, tensor<?x3x4xf32>
}
