//===- PEGatherOps.td ------------------------------------------*- tablegen -*-===//
//
// The pe dialect: ops introduced by the gather rewrites (skip-n gather, distinct offsets), with their backward ops. Included by PEOps.td.
//
// - pe.skip_gather (pe-skip-gather): skip-n attention, whose softmax rows have
//   one key each, as a shift of `v`; pe.skip_gather_grad is the reverse shift.
// - pe.offset_table and pe.pair_gather (pe-distinct-offsets): a compile-time
//   table of the distinct relative positions of a position table, and the
//   expansion of a per-offset table back to all `[T, T]` pairs;
//   pe.pair_gather_grad is its scatter-add.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_DIALECT_PE_PEGATHEROPS_TD
#define STRINGC_DIALECT_PE_PEGATHEROPS_TD

def PE_SkipGatherOp : PE_ComputeOp<"skip_gather", [PE_Differentiable]> {
  let summary = "skip-n attention with its single key: a per-head shift of v";
  let description = [{
    `pe.attention %q, %k, %v heads(H) mask(skip) skip_base(n)` lets head `s`
    of query `i` see only key `i - (n + s)`; a softmax over one key is 1, so
    the attention output is that key's value, whatever `q`, `k` and `scale`:

    ```
    y[b, i, s*Dh + m] = v[b, i - (n + s), s*Dh + m]   if i >= n + s
                      = 0                             otherwise
    ```

    with `Dh = D / heads`. Shapes: `v` `[B, T, D]`, `heads` dividing `D`,
    `skip_base >= 0`; the result has the type of `v`. Its gradient is the
    reverse shift, `pe.skip_gather_grad`.

    ```mlir
    %y = pe.skip_gather %v heads(4) skip_base(1) : tensor<?x64x64xf32> -> tensor<?x64x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$v, I64Attr:$heads, I64Attr:$skip_base);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $v `heads` `(` $heads `)` `skip_base` `(` $skip_base `)` attr-dict `:`
    type($v) `->` type($result)
  }];
}

def PE_SkipGatherGradOp : PE_ComputeOp<"skip_gather_grad"> {
  let summary = "gradient of pe.skip_gather: the reverse shift";
  let description = [{
    ```
    dv[b, j, s*Dh + m] = dy[b, j + n + s, s*Dh + m]   if j + n + s < T
                       = 0                            otherwise
    ```

    with `n = skip_base`, `Dh = D / heads`. Shapes: `dy` `[B, T, D]`; the
    result `dv` has its type.

    ```mlir
    %dv = pe.skip_gather_grad %dy heads(4) skip_base(1) : tensor<?x64x64xf32> -> tensor<?x64x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$dy, I64Attr:$heads, I64Attr:$skip_base);
  let results = (outs PE_FloatTensor:$dv);
  let assemblyFormat = [{
    $dy `heads` `(` $heads `)` `skip_base` `(` $skip_base `)` attr-dict `:`
    type($dy) `->` type($dv)
  }];
}

def PE_OffsetTableOp : PE_ComputeOp<"offset_table"> {
  let summary = "a compile-time table of integer offset vectors";
  let description = [{
    Row `u` of the `[U, A]` result is `offsets[u*A .. u*A + A - 1]`: integer
    vectors (positions of grids and sequences, and their differences, are
    integers), held exactly in `f32` (`|offset| <= 2^24`). pe-distinct-offsets
    builds it from the distinct values of `pe.relative_positions` of a
    `pe.seq_positions` / `pe.grid_positions` table, in first-appearance
    order over the row-major `(i, j)` pairs.

    A constant for autodiff: it has no operands and gets no gradient.

    ```mlir
    %r = pe.offset_table offsets([0, 0, 1, 0, -1, 0]) : tensor<3x2xf32>
    ```
  }];
  let arguments = (ins DenseI64ArrayAttr:$offsets);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = "`offsets` `(` $offsets `)` attr-dict `:` type($result)";
}

def PE_PairGatherOp : PE_ComputeOp<"pair_gather", [PE_Differentiable]> {
  let summary = "expands a per-offset table to every (i, j) pair";
  let description = [{
    `y[i, j, ...] = table[index[i*T + j], ...]`: pair `(i, j)` of `T` tokens
    reads row `index[i*T + j]` of `table`. Shapes (static): `table`
    `[U, S...]`; result `[T, T, S...]`; `index` has `T*T` entries, each in
    `[0, U)`. Its gradient is the scatter-add `pe.pair_gather_grad`.

    pe-distinct-offsets writes `generator_exp(relative_positions(pos), L)` as
    `pair_gather(generator_exp(offset_table, L))`: `U` matrix exponentials
    instead of `T*T`.

    ```mlir
    %R = pe.pair_gather %U index([0, 1, 2, 0]) : tensor<3x16x16xf32> -> tensor<2x2x16x16xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$table, DenseI64ArrayAttr:$index);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $table `index` `(` $index `)` attr-dict `:` type($table) `->` type($result)
  }];
}

def PE_PairGatherGradOp : PE_ComputeOp<"pair_gather_grad"> {
  let summary = "gradient of pe.pair_gather: scatter-add over the pairs";
  let description = [{
    `dtable[u, ...] = sum over the pairs (i, j) with index[i*T + j] = u of
    dy[i, j, ...]` (0 for a row no pair reads). Shapes (static): `dy`
    `[T, T, S...]`; result `[U, S...]`; `index` as for `pe.pair_gather`.

    ```mlir
    %dU = pe.pair_gather_grad %dR index([0, 1, 2, 0]) : tensor<2x2x16x16xf32> -> tensor<3x16x16xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$dy, DenseI64ArrayAttr:$index);
  let results = (outs PE_FloatTensor:$dtable);
  let assemblyFormat = [{
    $dy `index` `(` $index `)` attr-dict `:` type($dy) `->` type($dtable)
  }];
}

#endif // STRINGC_DIALECT_PE_PEGATHEROPS_TD
