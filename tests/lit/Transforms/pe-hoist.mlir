// pe-hoist: rope(x, pos, freqs) becomes rope_apply(x, rope_table(pos,
// freqs)) and cayley(x, S) becomes linear(x, cayley_weight(S)); the tables
// go right after their operands and duplicates of activation-free ops are
// merged, so Q and K share one table. Ops that read an activation are never
// merged.
// RUN: string-opt --pe-hoist -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-hoist=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// Two layers' Q and K with the same positions and frequencies: one table.
// CHECK-LABEL: func.func @shared_table(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<?x5x8xf32>, %[[K:[^:]*]]: tensor<?x5x8xf32>)
// CHECK-NEXT:    %[[POS:.*]] = pe.grid_positions
// CHECK-NEXT:    %[[F:.*]] = pe.rope_freqs
// CHECK-NEXT:    %[[T:.*]] = pe.rope_table %[[POS]], %[[F]] : tensor<5x2xf32>, tensor<4x2xf32> -> tensor<5x4x2xf32>
// CHECK-NOT:     pe.grid_positions
// CHECK-NOT:     pe.rope_freqs
// CHECK-NOT:     pe.rope_table
// CHECK-NOT:     pe.rope {{.*}}mode
// CHECK:         %[[RQ:.*]] = pe.rope_apply %[[Q]], %[[T]] :
// CHECK:         %[[RK:.*]] = pe.rope_apply %[[K]], %[[T]] :
// CHECK:         pe.rope_apply %{{.*}}, %[[T]] :
// CHECK:         pe.rope_apply %{{.*}}, %[[T]] :
// EXPLAIN-COUNT-4: remark: [pe-hoist] split RoPE into a cos/sin table
// EXPLAIN: remark: [pe-hoist] merged a duplicate pe.grid_positions (computed once per step)
func.func @shared_table(%q: tensor<?x5x8xf32>, %k: tensor<?x5x8xf32>) -> tensor<?x5x8xf32> {
  %pos = pe.grid_positions rows(2) cols(2) special(1) : tensor<5x2xf32>
  %f = pe.rope_freqs kind(axial) dim(8) heads(2) base(1.000000e+02) : tensor<4x2xf32>
  %rq = pe.rope %q, %pos, %f mode(axial) : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32> -> tensor<?x5x8xf32>
  %rk = pe.rope %k, %pos, %f mode(axial) : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32> -> tensor<?x5x8xf32>
  %a = pe.attention %rq, %rk, %q heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  // The second layer rebuilt its own positions and frequencies.
  %pos2 = pe.grid_positions rows(2) cols(2) special(1) : tensor<5x2xf32>
  %f2 = pe.rope_freqs kind(axial) dim(8) heads(2) base(1.000000e+02) : tensor<4x2xf32>
  %rq2 = pe.rope %a, %pos2, %f2 mode(axial) : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32> -> tensor<?x5x8xf32>
  %rk2 = pe.rope %k, %pos2, %f2 mode(axial) : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32> -> tensor<?x5x8xf32>
  %a2 = pe.attention %rq2, %rk2, %a heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
  return %a2 : tensor<?x5x8xf32>
}

// -----

// Different frequencies (another base) keep their own table; learned
// frequencies are a parameter read, merged like any activation-free op.
// CHECK-LABEL: func.func @distinct_tables(
// CHECK-NEXT:    %[[P:.*]] = pe.seq_positions
// CHECK-NEXT:    %[[F1:.*]] = pe.rope_freqs {{.*}}base(1.000000e+01)
// CHECK-NEXT:    %[[T1:.*]] = pe.rope_table %[[P]], %[[F1]]
// CHECK-NEXT:    %[[F2:.*]] = pe.rope_freqs {{.*}}base(1.000000e+04)
// CHECK-NEXT:    %[[T2:.*]] = pe.rope_table %[[P]], %[[F2]]
// CHECK-NEXT:    pe.rope_apply %arg0, %[[T1]]
// CHECK-NEXT:    pe.rope_apply %{{.*}}, %[[T2]]
// CHECK-NEXT:    %[[W:.*]] = pe.get_param @freqs
// CHECK-NEXT:    %[[T3:.*]] = pe.rope_table %[[P]], %[[W]]
// CHECK-NEXT:    pe.rope_apply %{{.*}}, %[[T3]]
// CHECK-NEXT:    pe.rope_apply %{{.*}}, %[[T3]]
// CHECK-NEXT:    return
pe.parameter @freqs : tensor<2x1xf32> {init = "zeros"}
func.func @distinct_tables(%x: tensor<?x3x4xf32>) -> tensor<?x3x4xf32> {
  %p = pe.seq_positions length(3) : tensor<3x1xf32>
  %f1 = pe.rope_freqs kind(seq) dim(4) heads(1) base(1.000000e+01) : tensor<2x1xf32>
  %f2 = pe.rope_freqs kind(seq) dim(4) heads(1) base(1.000000e+04) : tensor<2x1xf32>
  %y1 = pe.rope %x, %p, %f1 mode(seq) : tensor<?x3x4xf32>, tensor<3x1xf32>, tensor<2x1xf32> -> tensor<?x3x4xf32>
  %y2 = pe.rope %y1, %p, %f2 mode(seq) : tensor<?x3x4xf32>, tensor<3x1xf32>, tensor<2x1xf32> -> tensor<?x3x4xf32>
  %w = pe.get_param @freqs : tensor<2x1xf32>
  %y3 = pe.rope %y2, %p, %w mode(seq) : tensor<?x3x4xf32>, tensor<3x1xf32>, tensor<2x1xf32> -> tensor<?x3x4xf32>
  %w2 = pe.get_param @freqs : tensor<2x1xf32>
  %y4 = pe.rope %y3, %p, %w2 mode(seq) : tensor<?x3x4xf32>, tensor<3x1xf32>, tensor<2x1xf32> -> tensor<?x3x4xf32>
  return %y4 : tensor<?x3x4xf32>
}

// -----

// Cayley: one weight per S (after the skew that builds it), applied by
// pe.linear to Q and K.
// CHECK-LABEL: func.func @cayley(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<?x5x4xf32>, %[[K:[^:]*]]: tensor<?x5x4xf32>)
// CHECK-NEXT:    %[[P:.*]] = pe.get_param @s
// CHECK-NEXT:    %[[S:.*]] = pe.skew %[[P]]
// CHECK-NEXT:    %[[W:.*]] = pe.cayley_weight %[[S]] : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    %[[CQ:.*]] = pe.linear %[[Q]], %[[W]] : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
// CHECK-NEXT:    %[[CK:.*]] = pe.linear %[[K]], %[[W]] : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
// CHECK-NEXT:    pe.attention %[[CQ]], %[[CK]]
// EXPLAIN-COUNT-2: remark: [pe-hoist] hoisted the Cayley matrix U = (I - S)(I + S)^-1
// EXPLAIN: remark: [pe-hoist] merged a duplicate pe.cayley_weight
pe.parameter @s : tensor<6xf32> {init = "zeros"}
func.func @cayley(%q: tensor<?x5x4xf32>, %k: tensor<?x5x4xf32>) -> tensor<?x5x4xf32> {
  %p = pe.get_param @s : tensor<6xf32>
  %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
  %cq = pe.cayley %q, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %ck = pe.cayley %k, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
  %a = pe.attention %cq, %ck, %q heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x4xf32>, tensor<?x5x4xf32>, tensor<?x5x4xf32> -> tensor<?x5x4xf32>
  return %a : tensor<?x5x4xf32>
}

// -----

// Must not merge: identical ops on an activation (per example), and ops
// with different attributes.
// CHECK-LABEL: func.func @no_merge(
// CHECK:         pe.gelu %arg0
// CHECK:         pe.gelu %arg0
// CHECK:         pe.seq_positions length(3) :
// CHECK:         pe.seq_positions length(3) special(1)
// EXPLAIN-NOT: remark: [pe-hoist] merged a duplicate pe.gelu
func.func @no_merge(%x: tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<3x1xf32>, tensor<4x1xf32>) {
  %a = pe.gelu %x : tensor<?x3x4xf32> -> tensor<?x3x4xf32>
  %b = pe.gelu %x : tensor<?x3x4xf32> -> tensor<?x3x4xf32>
  %p = pe.seq_positions length(3) : tensor<3x1xf32>
  %q = pe.seq_positions length(3) special(1) : tensor<4x1xf32>
  return %a, %b, %p, %q : tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<3x1xf32>, tensor<4x1xf32>
}
