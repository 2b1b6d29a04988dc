// pe-cancel-orthogonal: attention(cayley(q, S), cayley(k, S), v) becomes
// attention(q, k, v) when U = cayley(S) is orthogonal on every head (heads
// = 1, or a sparse S inside the heads), with a warning: the transform has no
// effect. The cases after the first two must be left alone; with explain,
// they say why.
// RUN: string-opt --pe-cancel-orthogonal -split-input-file -verify-diagnostics %s | FileCheck %s
// RUN: string-opt --pe-cancel-orthogonal=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// One head, dense S: both transforms and the now-unused S are removed.
// CHECK-LABEL: func.func @one_head(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<?x5x4xf32>, %[[K:[^:]*]]: tensor<?x5x4xf32>, %[[V:[^:]*]]: tensor<?x5x4xf32>)
// CHECK-NEXT:    %[[A:.*]] = pe.attention %[[Q]], %[[K]], %[[V]] heads(1)
// CHECK-NEXT:    return %[[A]]
// EXPLAIN: remark: [pe-cancel-orthogonal] removed the Cayley transform of Q and K: it cancels in q^T k (forward per example:
pe.parameter @s : tensor<6xf32> {init = "zeros"}
func.func @one_head(%q: tensor<?x5x4xf32>, %k: tensor<?x5x4xf32>, %v: tensor<?x5x4xf32>) -> tensor<?x5x4xf32> {
  %p = pe.get_param @s : tensor<6xf32>
  %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  // expected-warning @+1 {{the Cayley transform is applied to both Q and K over whole heads, so it cancels in the attention scores ((U q)^T (U k) = q^T k) and has no effect; apply it before RoPE (the STRING order, rope(cayley(x, S), pos, freqs)), which does not cancel}}
  %cq = pe.cayley %q, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %ck = pe.cayley %k, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %a = pe.attention %cq, %ck, %v heads(1) scale(5.000000e-01) mask(causal) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %a : tensor<?x5x4xf32>
}

// -----

// Two heads of 4 columns, a sparse S whose pairs (0, 1) [k = 0], (2, 3)
// [k = 13] and (5, 7) [k = 26] stay inside a head: U is block-diagonal.
// CHECK-LABEL: func.func @sparse_within_heads(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<?x5x8xf32>, %[[K:[^:]*]]: tensor<?x5x8xf32>, %[[V:[^:]*]]: tensor<?x5x8xf32>, %{{.*}}: tensor<3xf32>)
// CHECK-NEXT:    pe.attention %[[Q]], %[[K]], %[[V]] heads(2)
func.func @sparse_within_heads(%q: tensor<?x5x8xf32>, %k: tensor<?x5x8xf32>, %v: tensor<?x5x8xf32>, %p: tensor<3xf32>) -> tensor<?x5x8xf32> {
  %s = pe.sparse_skew %p dim(8) fraction(1.000000e-01) seed(3) support([0, 13, 26]) : tensor<3xf32> -> tensor<8x8xf32>
  // expected-warning @+1 {{cancels in the attention scores}}
  %cq = pe.cayley %q, %s : tensor<?x5x8xf32>, tensor<8x8xf32> -> tensor<?x5x8xf32>
  %ck = pe.cayley %k, %s : tensor<?x5x8xf32>, tensor<8x8xf32> -> tensor<?x5x8xf32>
  %a = pe.attention %cq, %ck, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  return %a : tensor<?x5x8xf32>
}

// -----

// A sparse S with the pair (3, 4) [k = 18], which joins heads 0 and 1.
// CHECK-LABEL: func.func @sparse_across_heads(
// CHECK-COUNT-2: pe.cayley
// EXPLAIN: remark: [pe-cancel-orthogonal: not applied] the Cayley transform on Q and K does not cancel: the sparse S couples two heads (support entry (3, 4), heads of 4 columns), so U is not orthogonal per head
func.func @sparse_across_heads(%q: tensor<?x5x8xf32>, %k: tensor<?x5x8xf32>, %v: tensor<?x5x8xf32>, %p: tensor<2xf32>) -> tensor<?x5x8xf32> {
  %s = pe.sparse_skew %p dim(8) fraction(1.000000e-01) seed(3) support([0, 18]) : tensor<2xf32> -> tensor<8x8xf32>
  %cq = pe.cayley %q, %s : tensor<?x5x8xf32>, tensor<8x8xf32> -> tensor<?x5x8xf32>
  %ck = pe.cayley %k, %s : tensor<?x5x8xf32>, tensor<8x8xf32> -> tensor<?x5x8xf32>
  %a = pe.attention %cq, %ck, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  return %a : tensor<?x5x8xf32>
}

// -----

// A dense S over several heads mixes them (vit_cayley).
// CHECK-LABEL: func.func @dense_several_heads(
// CHECK-COUNT-2: pe.cayley
// EXPLAIN: remark: [pe-cancel-orthogonal: not applied] the Cayley transform on Q and K does not cancel: the dense S mixes the 2 heads, so U is not orthogonal per head
func.func @dense_several_heads(%q: tensor<?x5x8xf32>, %k: tensor<?x5x8xf32>, %v: tensor<?x5x8xf32>, %p: tensor<28xf32>) -> tensor<?x5x8xf32> {
  %s = pe.skew %p dim(8) : tensor<28xf32> -> tensor<8x8xf32>
  %cq = pe.cayley %q, %s : tensor<?x5x8xf32>, tensor<8x8xf32> -> tensor<?x5x8xf32>
  %ck = pe.cayley %k, %s : tensor<?x5x8xf32>, tensor<8x8xf32> -> tensor<?x5x8xf32>
  %a = pe.attention %cq, %ck, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  return %a : tensor<?x5x8xf32>
}

// -----

// Different S on Q and K.
// CHECK-LABEL: func.func @different_s(
// CHECK-COUNT-2: pe.cayley
// EXPLAIN: remark: [pe-cancel-orthogonal: not applied] the Cayley transform on Q and K does not cancel: Q and K use different S
func.func @different_s(%q: tensor<?x5x4xf32>, %k: tensor<?x5x4xf32>, %v: tensor<?x5x4xf32>, %p1: tensor<6xf32>, %p2: tensor<6xf32>) -> tensor<?x5x4xf32> {
  %s1 = pe.skew %p1 dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %s2 = pe.skew %p2 dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %cq = pe.cayley %q, %s1 : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %ck = pe.cayley %k, %s2 : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %a = pe.attention %cq, %ck, %v heads(1) scale(5.000000e-01) mask(none) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %a : tensor<?x5x4xf32>
}

// -----

// A relative rotation between them: U^T R U != R.
// CHECK-LABEL: func.func @relative(
// CHECK-COUNT-2: pe.cayley
// EXPLAIN: remark: [pe-cancel-orthogonal: not applied] the Cayley transform on Q and K does not cancel: a relative rotation sits between them (U^T R U != R)
func.func @relative(%q: tensor<?x5x4xf32>, %k: tensor<?x5x4xf32>, %v: tensor<?x5x4xf32>, %p: tensor<6xf32>, %rel: tensor<5x5x4x4xf32>) -> tensor<?x5x4xf32> {
  %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %cq = pe.cayley %q, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %ck = pe.cayley %k, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %a = pe.attention %cq, %ck, %v, %rel heads(1) scale(5.000000e-01) mask(none) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<5x5x4x4xf32> -> tensor<?x5x4xf32>
  return %a : tensor<?x5x4xf32>
}

// -----

// The transformed K is also returned.
// CHECK-LABEL: func.func @other_use(
// CHECK-COUNT-2: pe.cayley
// EXPLAIN: remark: [pe-cancel-orthogonal: not applied] the Cayley transform on Q and K does not cancel: the transformed Q or K has other uses
func.func @other_use(%q: tensor<?x5x4xf32>, %k: tensor<?x5x4xf32>, %v: tensor<?x5x4xf32>, %p: tensor<6xf32>) -> (tensor<?x5x4xf32>, tensor<?x5x4xf32>) {
  %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %cq = pe.cayley %q, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %ck = pe.cayley %k, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %a = pe.attention %cq, %ck, %v heads(1) scale(5.000000e-01) mask(none) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %a, %ck : tensor<?x5x4xf32>, tensor<?x5x4xf32>
}

// -----

// S is not built by a skew op: U = cayley(S) need not be orthogonal.
// CHECK-LABEL: func.func @unknown_s(
// CHECK-COUNT-2: pe.cayley
// EXPLAIN: remark: [pe-cancel-orthogonal: not applied] the Cayley transform on Q and K does not cancel: S is not built by pe.skew or pe.sparse_skew, so U is not known to be orthogonal
func.func @unknown_s(%q: tensor<?x5x4xf32>, %k: tensor<?x5x4xf32>, %v: tensor<?x5x4xf32>, %s: tensor<4x4xf32>) -> tensor<?x5x4xf32> {
  %cq = pe.cayley %q, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %ck = pe.cayley %k, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %a = pe.attention %cq, %ck, %v heads(1) scale(5.000000e-01) mask(none) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %a : tensor<?x5x4xf32>
}

// -----

// STRING order: RoPE after the transform keeps it from cancelling, and the
// pass does not look through RoPE.
// CHECK-LABEL: func.func @string_order(
// CHECK-COUNT-2: pe.cayley
func.func @string_order(%q: tensor<?x5x4xf32>, %k: tensor<?x5x4xf32>, %v: tensor<?x5x4xf32>, %p: tensor<6xf32>, %pos: tensor<5x1xf32>, %f: tensor<2x1xf32>) -> tensor<?x5x4xf32> {
  %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %cq = pe.cayley %q, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %ck = pe.cayley %k, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %rq = pe.rope %cq, %pos, %f mode(seq) : tensor<?x5x4xf32>, tensor<5x1xf32>, tensor<2x1xf32> -> tensor<?x5x4xf32>
  %rk = pe.rope %ck, %pos, %f mode(seq) : tensor<?x5x4xf32>, tensor<5x1xf32>, tensor<2x1xf32> -> tensor<?x5x4xf32>
  %a = pe.attention %rq, %rk, %v heads(1) scale(5.000000e-01) mask(none) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %a : tensor<?x5x4xf32>
}
