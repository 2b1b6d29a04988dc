//===- FusionModels.h - small .pe models for the fusion pass tests -*- C++ -*-===//
//
// Models that exercise what the seed examples do not: learned (mixed) RoPE
// frequencies, which pe-hoist must keep differentiable and
// pe-fuse-attention must leave alone, and a model with no rotation, dense
// GELU or residual at all.
//
//===----------------------------------------------------------------------===//

#pragma once

namespace stringc::test {

/// (10 classes: the harness draws labels in [0, 10).)
/// A 2-layer ViT on 8x8 images whose RoPE frequencies are learned (mode
/// mixed) and shared by both layers; an MLP with GELU and residual adds.
inline constexpr const char *kMixedRopeViT = R"pe(
model mixed_rope_vit

const D = 16
const heads = 2

input image: f32[B, 1, 8, 8]
input label: i32[B]

param w_patch: [4, D] = normal(std = 0.3)
param b_patch: [D] = normal(std = 0.1)
param cls: [D] = normal(std = 0.3)
param freqs: [D / 2, 2] = normal(std = 0.5)
param w_head: [D, 10] = normal(std = 0.3)

block encoder(x, pos, freqs) {
  param wq: [D, D] = normal(std = 0.3)
  param wk: [D, D] = normal(std = 0.3)
  param wv: [D, D] = normal(std = 0.3)
  param wo: [D, D] = normal(std = 0.3)
  param bo: [D] = normal(std = 0.1)
  param w1: [D, 32] = normal(std = 0.3)
  param b1: [32] = normal(std = 0.1)
  param w2: [32, D] = normal(std = 0.3)
  param b2: [D] = normal(std = 0.1)

  let q = rope(linear(x, wq), pos, freqs)
  let k = rope(linear(x, wk), pos, freqs)
  let a = attention(q, k, linear(x, wv), heads = heads)
  let x = x + linear(a, wo, bo)
  return x + linear(gelu(linear(x, w1, b1)), w2, b2)
}

let pos = grid_positions(rows = 4, cols = 4, special = 1)
let x = class_token(patch_embed(image, w_patch, b_patch, patch = 2), cls)
for layer in 0..2 {
  let x = encoder(x, pos, freqs)
}
output logits = linear(select_token(x, index = 0), w_head)

loss cross_entropy(logits, label)
optimizer sgd(lr = 0.1)
)pe";

/// No rotation, no GELU, no residual: nothing for the fusion passes.
inline constexpr const char *kPlainMLP = R"pe(
model plain_mlp

input image: f32[B, 1, 4, 4]
input label: i32[B]

param w_patch: [16, 8] = normal(std = 0.3)
param b_patch: [8] = zeros
param w_head: [8, 10] = normal(std = 0.3)

let x = patch_embed(image, w_patch, b_patch, patch = 4)
output logits = linear(relu(select_token(x, index = 0)), w_head)

loss cross_entropy(logits, label)
optimizer sgd(lr = 0.1)
)pe";

} // namespace stringc::test
