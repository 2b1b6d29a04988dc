//===- GatherModels.h - small .pe models for the gather passes --*- C++ -*-===//
//
// Models for the cases the examples do not cover: relative attention with a
// single generator over sequence positions (pe-factor-generators is exact
// for K = 1), and with two generators over positions that are inputs of no
// compile-time table. 10 classes: the harness draws labels in [0, 10).
//
//===----------------------------------------------------------------------===//

#pragma once

namespace stringc::test {

/// One learned skew generator (K = 1) over 1D positions with a CLS token,
/// two layers sharing R: exp((p_j - p_i) L) = R(p_i)^T R(p_j) exactly.
inline constexpr const char *kOneGenerator = R"pe(
model one_generator

const T = 8
const D = 16
const heads = 2
const Dh = D / heads

input x: f32[B, T, D]
input label: i32[B]

param cls: [D] = normal(std = 0.5, seed = 1)
param gen: [1, pairs(Dh)] = normal(std = 0.3, seed = 2)
param wq: [D, D] = normal(std = 0.5, seed = 3)
param wk: [D, D] = normal(std = 0.5, seed = 4)
param wv: [D, D] = normal(std = 0.5, seed = 5)
param wq2: [D, D] = normal(std = 0.5, seed = 6)
param w_out: [D, 10] = normal(std = 0.5, seed = 7)

let pos = seq_positions(length = T, special = 1)
let L = skew(gen, dim = Dh)
let R = generator_exp(relative_positions(pos), L)
let h = class_token(x, cls)
let a = attention(linear(h, wq), linear(h, wk), linear(h, wv), heads = heads, relative = R)
let b = attention(linear(a, wq2), linear(h, wk), a, heads = heads, mask = causal, relative = R)
output logits = linear(select_token(b, index = 0), w_out)
loss cross_entropy(logits, label)
optimizer sgd(lr = 0.1)
)pe";

} // namespace stringc::test
