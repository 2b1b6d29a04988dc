// pe-fuse-attention: attention(rope_apply(q, t), rope_apply(k, t), v)
// becomes rope_attention(q, k, v, t) when the rotated values feed nothing
// else, the table is not trainable, and the mask is none or causal without
// rel. The cases after the first two must be left alone.
// RUN: string-opt --pe-fuse-attention -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-fuse-attention=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// CHECK-LABEL: func.func @fuse(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<?x5x8xf32>, %[[K:[^:]*]]: tensor<?x5x8xf32>, %[[V:[^:]*]]: tensor<?x5x8xf32>)
// CHECK:         %[[T:.*]] = pe.rope_table
// CHECK-NEXT:    %[[A:.*]] = pe.rope_attention %[[Q]], %[[K]], %[[V]], %[[T]] heads(2) scale(5.000000e-01) mask(causal) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
// CHECK-NEXT:    return %[[A]]
// EXPLAIN: remark: [pe-fuse-attention] fused RoPE on Q and K into the attention kernel's prologue (the rotated Q and K are never written to memory) (forward per example:
func.func @fuse(%q: tensor<?x5x8xf32>, %k: tensor<?x5x8xf32>, %v: tensor<?x5x8xf32>) -> tensor<?x5x8xf32> {
  %pos = pe.seq_positions length(5) : tensor<5x1xf32>
  %f = pe.rope_freqs kind(seq) dim(8) heads(2) base(1.000000e+01) : tensor<4x1xf32>
  %t = pe.rope_table %pos, %f : tensor<5x1xf32>, tensor<4x1xf32> -> tensor<5x4x2xf32>
  %rq = pe.rope_apply %q, %t : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %rk = pe.rope_apply %k, %t : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %a = pe.attention %rq, %rk, %v heads(2) scale(5.000000e-01) mask(causal) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  return %a : tensor<?x5x8xf32>
}

// -----

// A frozen frequency table is a constant: fused.
// CHECK-LABEL: func.func @frozen_freqs(
// CHECK:         pe.rope_attention
// CHECK-NOT:     pe.rope_apply
// EXPLAIN: remark: [pe-fuse-attention] fused RoPE on Q and K
pe.parameter @freqs : tensor<2x1xf32> frozen {init = "zeros"}
func.func @frozen_freqs(%q: tensor<?x3x4xf32>, %v: tensor<?x3x4xf32>) -> tensor<?x3x4xf32> {
  %pos = pe.seq_positions length(3) : tensor<3x1xf32>
  %f = pe.get_param @freqs : tensor<2x1xf32>
  %t = pe.rope_table %pos, %f : tensor<3x1xf32>, tensor<2x1xf32> -> tensor<3x2x2xf32>
  %rq = pe.rope_apply %q, %t : tensor<?x3x4xf32>, tensor<3x2x2xf32> -> tensor<?x3x4xf32>
  %a = pe.attention %rq, %rq, %v heads(1) scale(5.000000e-01) mask(none) : tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32> -> tensor<?x3x4xf32>
  return %a : tensor<?x3x4xf32>
}

// -----

// Learned (trainable) frequencies: the fused backward has no table
// gradient, so the attention stays.
// CHECK-LABEL: func.func @trainable_table(
// CHECK:         pe.rope_apply
// CHECK:         pe.rope_apply
// CHECK:         pe.attention
// CHECK-NOT:     pe.rope_attention
// EXPLAIN-NOT:   remark: [pe-fuse-attention]
pe.parameter @freqs : tensor<2x1xf32> {init = "zeros"}
func.func @trainable_table(%q: tensor<?x3x4xf32>, %k: tensor<?x3x4xf32>, %v: tensor<?x3x4xf32>) -> tensor<?x3x4xf32> {
  %pos = pe.seq_positions length(3) : tensor<3x1xf32>
  %f = pe.get_param @freqs : tensor<2x1xf32>
  %t = pe.rope_table %pos, %f : tensor<3x1xf32>, tensor<2x1xf32> -> tensor<3x2x2xf32>
  %rq = pe.rope_apply %q, %t : tensor<?x3x4xf32>, tensor<3x2x2xf32> -> tensor<?x3x4xf32>
  %rk = pe.rope_apply %k, %t : tensor<?x3x4xf32>, tensor<3x2x2xf32> -> tensor<?x3x4xf32>
  %a = pe.attention %rq, %rk, %v heads(1) scale(5.000000e-01) mask(none) : tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32> -> tensor<?x3x4xf32>
  return %a : tensor<?x3x4xf32>
}

// -----

// Not fused: a skip mask, different tables, a rotated Q used elsewhere, an
// inverse rotation, odd head width.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT:     pe.rope_attention
// CHECK:         return
func.func @left_alone(%q: tensor<?x5x8xf32>, %k: tensor<?x5x8xf32>, %v: tensor<?x5x8xf32>, %v6: tensor<?x5x6xf32>) -> (tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x6xf32>) {
  %pos = pe.seq_positions length(5) : tensor<5x1xf32>
  %f = pe.rope_freqs kind(seq) dim(8) heads(2) base(1.000000e+01) : tensor<4x1xf32>
  %f2 = pe.rope_freqs kind(seq) dim(8) heads(2) base(1.000000e+02) : tensor<4x1xf32>
  %t = pe.rope_table %pos, %f : tensor<5x1xf32>, tensor<4x1xf32> -> tensor<5x4x2xf32>
  %t2 = pe.rope_table %pos, %f2 : tensor<5x1xf32>, tensor<4x1xf32> -> tensor<5x4x2xf32>
  %rq = pe.rope_apply %q, %t : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %rk = pe.rope_apply %k, %t : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %skip = pe.attention %rq, %rk, %v heads(2) scale(5.000000e-01) mask(skip) skip_base(1) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  %rk2 = pe.rope_apply %k, %t2 : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %rq2 = pe.rope_apply %v, %t : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %mixed = pe.attention %rq2, %rk2, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  %rq3 = pe.rope_apply %q, %t : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %rk3 = pe.rope_apply %k, %t : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %shared = pe.attention %rq3, %rk3, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  %iq = pe.rope_apply %q, %t inverse(true) : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %ik = pe.rope_apply %k, %t inverse(true) : tensor<?x5x8xf32>, tensor<5x4x2xf32> -> tensor<?x5x8xf32>
  %inv = pe.attention %iq, %ik, %v heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  %pos6 = pe.seq_positions length(5) : tensor<5x1xf32>
  %f6 = pe.rope_freqs kind(seq) dim(6) heads(1) base(1.000000e+01) : tensor<3x1xf32>
  %t6 = pe.rope_table %pos6, %f6 : tensor<5x1xf32>, tensor<3x1xf32> -> tensor<5x3x2xf32>
  %q6 = pe.rope_apply %v6, %t6 : tensor<?x5x6xf32>, tensor<5x3x2xf32> -> tensor<?x5x6xf32>
  %odd = pe.attention %q6, %q6, %v6 heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x6xf32>, tensor<?x5x6xf32>, tensor<?x5x6xf32> -> tensor<?x5x6xf32>
  return %skip, %mixed, %shared, %rq3, %inv, %odd : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x6xf32>
}
