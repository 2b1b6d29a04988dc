// pe-distinct-offsets: generator_exp over relative_positions of a
// seq_positions / grid_positions table exponentiates each distinct offset
// once (pe.offset_table) and expands the result to every pair
// (pe.pair_gather). Positions it cannot evaluate, and tables whose offsets
// are all distinct, are left alone.
// RUN: string-opt --pe-distinct-offsets -split-input-file %s | FileCheck %s
// RUN: string-opt --pe-distinct-offsets=explain=true -split-input-file %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// A 2x2 grid with CLS (5 tokens, 25 pairs): CLS sits at (0, 0), so the
// offsets are those of the grid, (2*2-1)^2 = 9, in first-appearance order
// over the row-major pairs: row 0 (CLS) gives (0,0) (0,0) (1,0) (0,1) (1,1).
// CHECK-LABEL: func.func @grid(
// CHECK-SAME:    %[[L:[^:]*]]: tensor<2x4x4xf32>
// CHECK-NOT:     pe.relative_positions
// CHECK-NOT:     pe.grid_positions
// CHECK:         %[[T:.*]] = pe.offset_table offsets([0, 0, 1, 0, 0, 1, 1, 1, -1, 0, -1, 1, 0, -1, 1, -1, -1, -1]) : tensor<9x2xf32>
// CHECK-NEXT:    %[[U:.*]] = pe.generator_exp %[[T]], %[[L]] : tensor<9x2xf32>, tensor<2x4x4xf32> -> tensor<9x4x4xf32>
// CHECK-NEXT:    %[[R:.*]] = pe.pair_gather %[[U]] index([0, 0, 1, 2, 3, 0, 0, 1, 2, 3, 4, 4, 0, 5, 2, 6, 6, 7, 0, 1, 8, 8, 6, 4, 0]) : tensor<9x4x4xf32> -> tensor<5x5x4x4xf32>
// CHECK-NEXT:    return %[[R]]
// EXPLAIN: remark: [pe-distinct-offsets] exponentiated the 9 distinct offsets instead of all 25 pairs, then gathered (forward per example:
func.func @grid(%L: tensor<2x4x4xf32>) -> tensor<5x5x4x4xf32> {
  %pos = pe.grid_positions rows(2) cols(2) special(1) : tensor<5x2xf32>
  %r = pe.relative_positions %pos : tensor<5x2xf32> -> tensor<5x5x2xf32>
  %R = pe.generator_exp %r, %L : tensor<5x5x2xf32>, tensor<2x4x4xf32> -> tensor<5x5x4x4xf32>
  return %R : tensor<5x5x4x4xf32>
}

// -----

// A sequence of 3 (no special token): offsets -2..2, 5 of 9; the relative
// positions have another use, so they stay.
// CHECK-LABEL: func.func @sequence(
// CHECK:         %[[P:.*]] = pe.seq_positions length(3)
// CHECK-NEXT:    %[[RP:.*]] = pe.relative_positions %[[P]]
// CHECK-NEXT:    %[[T:.*]] = pe.offset_table offsets([0, 1, 2, -1, -2]) : tensor<5x1xf32>
// CHECK-NEXT:    %[[U:.*]] = pe.generator_exp %[[T]], %{{.*}} : tensor<5x1xf32>, tensor<1x2x2xf32> -> tensor<5x2x2xf32>
// CHECK-NEXT:    %[[R:.*]] = pe.pair_gather %[[U]] index([0, 1, 2, 3, 0, 1, 4, 3, 0]) : tensor<5x2x2xf32> -> tensor<3x3x2x2xf32>
// CHECK-NEXT:    return %[[R]], %[[RP]]
// EXPLAIN: remark: [pe-distinct-offsets] exponentiated the 5 distinct offsets instead of all 9 pairs, then gathered
func.func @sequence(%L: tensor<1x2x2xf32>) -> (tensor<3x3x2x2xf32>, tensor<3x3x1xf32>) {
  %pos = pe.seq_positions length(3) : tensor<3x1xf32>
  %r = pe.relative_positions %pos : tensor<3x1xf32> -> tensor<3x3x1xf32>
  %R = pe.generator_exp %r, %L : tensor<3x3x1xf32>, tensor<1x2x2xf32> -> tensor<3x3x2x2xf32>
  return %R, %r : tensor<3x3x2x2xf32>, tensor<3x3x1xf32>
}

// -----

// Must not fire: positions that are not a compile-time table (an argument),
// absolute positions (no relative_positions), and a single token (its one
// offset is already distinct: U = T*T).
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT:     pe.offset_table
// CHECK-NOT:     pe.pair_gather
// CHECK:         return
// EXPLAIN-NOT: remark
func.func @left_alone(%pos: tensor<3x2xf32>, %L: tensor<2x2x2xf32>) -> (tensor<3x3x2x2xf32>, tensor<3x2x2xf32>, tensor<1x1x2x2xf32>) {
  %r = pe.relative_positions %pos : tensor<3x2xf32> -> tensor<3x3x2xf32>
  %R = pe.generator_exp %r, %L : tensor<3x3x2xf32>, tensor<2x2x2xf32> -> tensor<3x3x2x2xf32>
  %A = pe.generator_exp %pos, %L : tensor<3x2xf32>, tensor<2x2x2xf32> -> tensor<3x2x2xf32>
  %one = pe.grid_positions rows(1) cols(1) : tensor<1x2xf32>
  %r1 = pe.relative_positions %one : tensor<1x2xf32> -> tensor<1x1x2xf32>
  %R1 = pe.generator_exp %r1, %L : tensor<1x1x2xf32>, tensor<2x2x2xf32> -> tensor<1x1x2x2xf32>
  return %R, %A, %R1 : tensor<3x3x2x2xf32>, tensor<3x2x2xf32>, tensor<1x1x2x2xf32>
}
