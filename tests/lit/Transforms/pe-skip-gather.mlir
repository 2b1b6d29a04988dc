// pe-skip-gather: a skip-n attention lets each query see one key, so it is
// a per-head shift of v (pe.skip_gather); q, k and whatever only they needed
// (frozen W_Q / W_K projections, RoPE) are erased. Causal and unmasked
// attentions are left alone.
// RUN: string-opt --pe-skip-gather -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-skip-gather=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// The skip GPT's attention: q and k come from frozen projections and RoPE,
// which become dead; the layer norm stays (v reads it).
// CHECK-LABEL: func.func @rope_skip(
// CHECK-SAME:    %[[H:[^:]*]]: tensor<?x6x8xf32>
// CHECK-NOT:     pe.get_param @wq
// CHECK-NOT:     pe.get_param @wk
// CHECK:         %[[WV:.*]] = pe.get_param @wv
// CHECK-NOT:     pe.rope
// CHECK-NOT:     pe.seq_positions
// CHECK:         %[[V:.*]] = pe.linear %[[H]], %[[WV]]
// CHECK-NEXT:    %[[Y:.*]] = pe.skip_gather %[[V]] heads(2) skip_base(1) : tensor<?x6x8xf32> -> tensor<?x6x8xf32>
// CHECK-NEXT:    return %[[Y]]
// EXPLAIN: remark: [pe-skip-gather] skip-n attention reads one key per query: a shift of v, no scores (q, k and their producers are dead) (forward per example:
pe.parameter @wq : tensor<8x8xf32> frozen {init = "zeros"}
pe.parameter @wk : tensor<8x8xf32> frozen {init = "zeros"}
pe.parameter @wv : tensor<8x8xf32> {init = "zeros"}
func.func @rope_skip(%h: tensor<?x6x8xf32>) -> tensor<?x6x8xf32> {
  %wq = pe.get_param @wq : tensor<8x8xf32>
  %wk = pe.get_param @wk : tensor<8x8xf32>
  %wv = pe.get_param @wv : tensor<8x8xf32>
  %pos = pe.seq_positions length(6) : tensor<6x1xf32>
  %f = pe.rope_freqs kind(seq) dim(8) heads(2) base(1.000000e+04) : tensor<4x1xf32>
  %lq = pe.linear %h, %wq : tensor<?x6x8xf32>, tensor<8x8xf32> -> tensor<?x6x8xf32>
  %lk = pe.linear %h, %wk : tensor<?x6x8xf32>, tensor<8x8xf32> -> tensor<?x6x8xf32>
  %q = pe.rope %lq, %pos, %f mode(seq) : tensor<?x6x8xf32>, tensor<6x1xf32>, tensor<4x1xf32> -> tensor<?x6x8xf32>
  %k = pe.rope %lk, %pos, %f mode(seq) : tensor<?x6x8xf32>, tensor<6x1xf32>, tensor<4x1xf32> -> tensor<?x6x8xf32>
  %v = pe.linear %h, %wv : tensor<?x6x8xf32>, tensor<8x8xf32> -> tensor<?x6x8xf32>
  %a = pe.attention %q, %k, %v heads(2) scale(5.000000e-01) mask(skip) skip_base(1) : tensor<?x6x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32> -> tensor<?x6x8xf32>
  return %a : tensor<?x6x8xf32>
}

// -----

// q == k, and q has another use: it stays; skip_base 0 keeps its value.
// CHECK-LABEL: func.func @shared_query(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<?x4x4xf32>, %[[V:[^:]*]]: tensor<?x4x4xf32>)
// CHECK-NEXT:    %[[Y:.*]] = pe.skip_gather %[[V]] heads(1) skip_base(0)
// CHECK-NEXT:    %[[S:.*]] = pe.add %[[Y]], %[[Q]]
// CHECK-NEXT:    return %[[S]]
// EXPLAIN: remark: [pe-skip-gather] skip-n attention reads one key per query
func.func @shared_query(%q: tensor<?x4x4xf32>, %v: tensor<?x4x4xf32>) -> tensor<?x4x4xf32> {
  %a = pe.attention %q, %q, %v heads(1) scale(5.000000e-01) mask(skip) skip_base(0) : tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32> -> tensor<?x4x4xf32>
  %s = pe.add %a, %q : tensor<?x4x4xf32>, tensor<?x4x4xf32> -> tensor<?x4x4xf32>
  return %s : tensor<?x4x4xf32>
}

// -----

// Must not fire: causal and unmasked attention see several keys.
// CHECK-LABEL: func.func @causal(
// CHECK-NOT:     pe.skip_gather
// CHECK:         pe.attention %{{.*}} mask(causal)
// CHECK:         pe.attention %{{.*}} mask(none)
// EXPLAIN-NOT: remark
func.func @causal(%q: tensor<?x4x4xf32>, %k: tensor<?x4x4xf32>, %v: tensor<?x4x4xf32>) -> tensor<?x4x4xf32> {
  %a = pe.attention %q, %k, %v heads(1) scale(5.000000e-01) mask(causal) : tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32> -> tensor<?x4x4xf32>
  %b = pe.attention %a, %k, %v heads(1) scale(5.000000e-01) mask(none) : tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32> -> tensor<?x4x4xf32>
  return %b : tensor<?x4x4xf32>
}
