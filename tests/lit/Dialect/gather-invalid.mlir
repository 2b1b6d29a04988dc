// One case per verifier rule of the gather ops (PEGatherOps.td).
// RUN: string-opt %s -split-input-file -verify-diagnostics

func.func @f(%v: tensor<?x4x6xf32>) {
  // expected-error @+1 {{'pe.skip_gather' op heads (4) must be positive and divide the model width 6}}
  %y = pe.skip_gather %v heads(4) skip_base(1) : tensor<?x4x6xf32> -> tensor<?x4x6xf32>
  return
}

// -----

func.func @f(%v: tensor<?x4x6xf32>) {
  // expected-error @+1 {{'pe.skip_gather' op skip_base must be non-negative, got -1}}
  %y = pe.skip_gather %v heads(2) skip_base(-1) : tensor<?x4x6xf32> -> tensor<?x4x6xf32>
  return
}

// -----

func.func @f(%v: tensor<?x4xf32>) {
  // expected-error @+1 {{'pe.skip_gather' op operand 'v' must have rank 3}}
  %y = pe.skip_gather %v heads(2) skip_base(1) : tensor<?x4xf32> -> tensor<?x4xf32>
  return
}

// -----

func.func @f(%dy: tensor<?x4x6xf32>) {
  // expected-error @+1 {{'pe.skip_gather_grad' op result type must be 'tensor<?x4x6xf32>', got 'tensor<?x5x6xf32>'}}
  %y = pe.skip_gather_grad %dy heads(2) skip_base(1) : tensor<?x4x6xf32> -> tensor<?x5x6xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'pe.offset_table' op offsets must hold U*A = 4 entries (U, A > 0) for the result 'tensor<2x2xf32>', got 3}}
  %t = pe.offset_table offsets([0, 1, 2]) : tensor<2x2xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'pe.offset_table' op result must be a static [U, A] table, got 'tensor<4xf32>'}}
  %t = pe.offset_table offsets([0, 1, 2, 3]) : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'pe.offset_table' op offset 16777217 is not exactly representable in f32}}
  %t = pe.offset_table offsets([16777217]) : tensor<1x1xf32>
  return
}

// -----

func.func @f(%u: tensor<3x4x4xf32>) {
  // expected-error @+1 {{'pe.pair_gather' op index entry 3 is out of range for a table of 3 rows}}
  %r = pe.pair_gather %u index([0, 1, 3, 0]) : tensor<3x4x4xf32> -> tensor<2x2x4x4xf32>
  return
}

// -----

func.func @f(%u: tensor<3x4x4xf32>) {
  // expected-error @+1 {{'pe.pair_gather' op index must have T*T = 4 entries, got 3}}
  %r = pe.pair_gather %u index([0, 1, 2]) : tensor<3x4x4xf32> -> tensor<2x2x4x4xf32>
  return
}

// -----

func.func @f(%u: tensor<3x4x4xf32>) {
  // expected-error @+1 {{'pe.pair_gather' op 'result' must have shape [T, T, 4, 4] (the table's trailing dimensions), got 'tensor<2x3x4x4xf32>'}}
  %r = pe.pair_gather %u index([0, 1, 2, 0, 1, 2]) : tensor<3x4x4xf32> -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @f(%u: tensor<?x4xf32>) {
  // expected-error @+1 {{'pe.pair_gather' op 'table' must be a static [U, ...] table, got 'tensor<?x4xf32>'}}
  %r = pe.pair_gather %u index([0, 1, 2, 0]) : tensor<?x4xf32> -> tensor<2x2x4xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x2x4xf32>) {
  // expected-error @+1 {{'pe.pair_gather_grad' op 'dy' must have shape [T, T, 5] (the table's trailing dimensions), got 'tensor<2x2x4xf32>'}}
  %d = pe.pair_gather_grad %dy index([0, 1, 2, 0]) : tensor<2x2x4xf32> -> tensor<3x5xf32>
  return
}
