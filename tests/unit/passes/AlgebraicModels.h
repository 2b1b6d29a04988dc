//===- AlgebraicModels.h - small .pe models for the algebraic passes -*- C++ -*-===//
//
// Models for the cases the examples do not cover: a one-head attention whose
// Cayley transform cancels (pe-cancel-orthogonal), non-zero gates and gates
// with different gammas (pe-spd-gate-square must not fire on those), and a STRING projection with a
// bias (pe-fold-transform folds it too). 10 classes: the harness draws labels
// in [0, 10).
//
//===----------------------------------------------------------------------===//

#pragma once

namespace stringc::test {

/// One head, RoPE then a Cayley transform on Q and K (vit_cayley's order):
/// U cancels in q^T k.
inline constexpr const char *kCayleyOneHead = R"pe(
model cayley_one_head

const T = 8
const D = 8

input x: f32[B, T, D]
input label: i32[B]

param wq: [D, D] = normal(std = 0.5, seed = 1)
param wk: [D, D] = normal(std = 0.5, seed = 2)
param wv: [D, D] = normal(std = 0.5, seed = 3)
param s: [pairs(D)] = normal(std = 0.5, seed = 4)
param w_out: [D, 10] = normal(std = 0.5, seed = 5)

let pos = seq_positions(length = T)
let freqs = rope_freqs(dim = D, heads = 1, base = 100)
let S = skew(s, dim = D)
let q = cayley(rope(linear(x, wq), pos, freqs), S)
let k = cayley(rope(linear(x, wk), pos, freqs), S)
let a = attention(q, k, linear(x, wv), heads = 1)
output logits = linear(mean(a, axis = 1), w_out)
loss cross_entropy(logits, label)
optimizer sgd(lr = 0.1)
)pe";

/// Polar RoPE with one learned, non-zero gate on Q and K, two heads.
inline constexpr const char *kSameGates = R"pe(
model same_gates

const T = 6
const D = 8

input x: f32[B, T, D]
input label: i32[B]

param wq: [D, D] = normal(std = 0.5, seed = 1)
param wk: [D, D] = normal(std = 0.5, seed = 2)
param wv: [D, D] = normal(std = 0.5, seed = 3)
param gamma: [D] = normal(std = 0.5, seed = 4)
param w_out: [D, 10] = normal(std = 0.5, seed = 5)

let pos = seq_positions(length = T)
let freqs = rope_freqs(dim = D, heads = 2, base = 100)
let q = spd_gate(rope(linear(x, wq), pos, freqs), gamma)
let k = spd_gate(rope(linear(x, wk), pos, freqs), gamma)
let a = attention(q, k, linear(x, wv), heads = 2, mask = causal)
output logits = linear(mean(a, axis = 1), w_out)
loss cross_entropy(logits, label)
optimizer sgd(lr = 0.1)
)pe";

/// Q and K gated with different gammas: D1 D2 is not a square.
inline constexpr const char *kDifferentGates = R"pe(
model different_gates

const T = 6
const D = 8

input x: f32[B, T, D]
input label: i32[B]

param wq: [D, D] = normal(std = 0.5, seed = 1)
param wk: [D, D] = normal(std = 0.5, seed = 2)
param wv: [D, D] = normal(std = 0.5, seed = 3)
param g1: [D] = normal(std = 0.3, seed = 4)
param g2: [D] = normal(std = 0.3, seed = 5)
param w_out: [D, 10] = normal(std = 0.5, seed = 6)

let q = spd_gate(linear(x, wq), g1)
let k = spd_gate(linear(x, wk), g2)
let a = attention(q, k, linear(x, wv), heads = 2)
output logits = linear(mean(a, axis = 1), w_out)
loss cross_entropy(logits, label)
optimizer sgd(lr = 0.1)
)pe";

/// The STRING order with biased projections and two heads: the transform
/// folds into W and b.
inline constexpr const char *kStringWithBias = R"pe(
model string_with_bias

const T = 6
const D = 8

input x: f32[B, T, D]
input label: i32[B]

param wq: [D, D] = normal(std = 0.5, seed = 1)
param bq: [D] = normal(std = 0.3, seed = 2)
param wk: [D, D] = normal(std = 0.5, seed = 3)
param bk: [D] = normal(std = 0.3, seed = 4)
param wv: [D, D] = normal(std = 0.5, seed = 5)
param s: [pairs(D)] = normal(std = 0.5, seed = 6)
param w_out: [D, 10] = normal(std = 0.5, seed = 7)

let pos = seq_positions(length = T)
let freqs = rope_freqs(dim = D, heads = 2, base = 100)
let S = skew(s, dim = D)
let q = rope(cayley(linear(x, wq, bq), S), pos, freqs)
let k = rope(cayley(linear(x, wk, bk), S), pos, freqs)
let a = attention(q, k, linear(x, wv), heads = 2, mask = causal)
output logits = linear(mean(a, axis = 1), w_out)
loss cross_entropy(logits, label)
optimizer sgd(lr = 0.1)
)pe";

} // namespace stringc::test
