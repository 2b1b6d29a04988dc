// Every pe op survives print -> parse -> print, in its custom form and in the
// generic form.
// RUN: string-opt %s -split-input-file | string-opt -split-input-file | FileCheck %s
// RUN: string-opt %s -split-input-file -mlir-print-op-generic | string-opt -split-input-file | FileCheck %s

// A ViT with axial RoPE on a 7x7 grid plus CLS: module-level declarations,
// embeddings, one encoder block and the classification loss.
// CHECK: pe.parameter @w_patch : tensor<16x64xf32> {init = "normal", mean = 0.000000e+00 : f64, seed = 11 : i64, std = 2.000000e-02 : f64}
// CHECK: pe.parameter @b_patch : tensor<64xf32> {init = "zeros"}
// CHECK: pe.parameter @cls : tensor<64xf32> {high = 1.000000e-01 : f64, init = "uniform", low = -1.000000e-01 : f64, seed = 3 : i64}
// CHECK: pe.parameter @ln_g : tensor<64xf32> {init = "ones"}
// CHECK: pe.parameter @ln_b : tensor<64xf32> {init = "constant", value = 5.000000e-01 : f64}
// CHECK: pe.parameter @wq : tensor<64x64xf32> frozen {file = "weights.safetensors", init = "load", tensor = "wq"}
// CHECK: pe.parameter @w_head : tensor<64x10xf32> {init = "normal", mean = 0.000000e+00 : f64, seed = -4 : i64, std = 2.000000e-02 : f64}
// CHECK: pe.parameter @b_head : tensor<10xf32> {init = "zeros"}
// CHECK: pe.optimizer {clip_norm = 1.000000e+00 : f64, kind = "adamw", min_lr = 1.000000e-05 : f64, schedule = "warmup_cosine", warmup_steps = 100 : i64, weight_decay = 5.000000e-02 : f64}
// CHECK: pe.dataset {crop_padding = 2 : i64, erase = 2.500000e-01 : f64, flip = 5.000000e-01 : f64, kind = "idx", path = "/usr/share/datasets/fashion-mnist"}
// CHECK-LABEL: func.func @forward(
// CHECK: %{{.*}} = pe.get_param @w_patch : tensor<16x64xf32>
// CHECK: %{{.*}} = pe.get_param @b_patch : tensor<64xf32>
// CHECK: %{{.*}} = pe.patch_embed %{{.*}}, %{{.*}}, %{{.*}} patch(4) : tensor<?x1x28x28xf32>, tensor<16x64xf32>, tensor<64xf32> -> tensor<?x49x64xf32>
// CHECK: %{{.*}} = pe.get_param @cls : tensor<64xf32>
// CHECK: %{{.*}} = pe.class_token %{{.*}}, %{{.*}} : tensor<?x49x64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
// CHECK: %{{.*}} = pe.get_param @ln_g : tensor<64xf32>
// CHECK: %{{.*}} = pe.get_param @ln_b : tensor<64xf32>
// CHECK: %{{.*}} = pe.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
// CHECK: %{{.*}} = pe.get_param @wq : tensor<64x64xf32>
// CHECK: %{{.*}} = pe.linear %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<64x64xf32> -> tensor<?x50x64xf32>
// CHECK: %{{.*}} = pe.grid_positions rows(7) cols(7) special(1) : tensor<50x2xf32>
// CHECK: %{{.*}} = pe.rope_freqs kind(axial) dim(64) heads(4) base(1.000000e+02) : tensor<32x2xf32>
// CHECK: %{{.*}} = pe.rope %{{.*}}, %{{.*}}, %{{.*}} mode(axial) : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32> -> tensor<?x50x64xf32>
// CHECK: %{{.*}} = pe.attention %{{.*}}, %{{.*}}, %{{.*}} heads(4) scale(2.500000e-01) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
// CHECK: %{{.*}} = pe.add %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
// CHECK: %{{.*}} = pe.layer_norm %{{.*}}, %{{.*}}, %{{.*}} epsilon(9.9999999999999995E-7) : tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
// CHECK: %{{.*}} = pe.gelu %{{.*}} : tensor<?x50x64xf32> -> tensor<?x50x64xf32>
// CHECK: %{{.*}} = pe.add %{{.*}}, %{{.*}} : tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
// CHECK: %{{.*}} = pe.select_token %{{.*}} index(0) : tensor<?x50x64xf32> -> tensor<?x64xf32>
// CHECK: %{{.*}} = pe.get_param @w_head : tensor<64x10xf32>
// CHECK: %{{.*}} = pe.get_param @b_head : tensor<10xf32>
// CHECK: %{{.*}} = pe.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<64x10xf32>, tensor<10xf32> -> tensor<?x10xf32>
// CHECK: %{{.*}} = pe.cross_entropy %{{.*}}, %{{.*}} : tensor<?x10xf32>, tensor<?xi32> -> tensor<f32>

module {
  pe.parameter @w_patch : tensor<16x64xf32> {init = "normal", mean = 0.0 : f64, std = 0.02 : f64, seed = 11 : i64}
  pe.parameter @b_patch : tensor<64xf32> {init = "zeros"}
  pe.parameter @cls : tensor<64xf32> {init = "uniform", low = -0.1 : f64, high = 0.1 : f64, seed = 3 : i64}
  pe.parameter @ln_g : tensor<64xf32> {init = "ones"}
  pe.parameter @ln_b : tensor<64xf32> {init = "constant", value = 0.5 : f64}
  pe.parameter @wq : tensor<64x64xf32> frozen {init = "load", file = "weights.safetensors", tensor = "wq"}
  pe.parameter @w_head : tensor<64x10xf32> {init = "normal", mean = 0.0 : f64, std = 0.02 : f64, seed = -4 : i64}
  pe.parameter @b_head : tensor<10xf32> {init = "zeros"}
  pe.optimizer {kind = "adamw", lr = 1.0e-3 : f64, weight_decay = 0.05 : f64, clip_norm = 1.0 : f64, schedule = "warmup_cosine", warmup_steps = 100 : i64, min_lr = 1.0e-5 : f64}
  pe.dataset {kind = "idx", path = "/usr/share/datasets/fashion-mnist", crop_padding = 2 : i64, flip = 0.5 : f64, erase = 0.25 : f64}

  func.func @forward(%image: tensor<?x1x28x28xf32> {pe.input = "image"}, %label: tensor<?xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}, tensor<?x10xf32> {pe.output = "logits"}) {
    %wp = pe.get_param @w_patch : tensor<16x64xf32>
    %bp = pe.get_param @b_patch : tensor<64xf32>
    %e = pe.patch_embed %image, %wp, %bp patch(4) : tensor<?x1x28x28xf32>, tensor<16x64xf32>, tensor<64xf32> -> tensor<?x49x64xf32>
    %cls = pe.get_param @cls : tensor<64xf32>
    %x = pe.class_token %e, %cls : tensor<?x49x64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
    %g = pe.get_param @ln_g : tensor<64xf32>
    %b = pe.get_param @ln_b : tensor<64xf32>
    %h = pe.layer_norm %x, %g, %b : tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
    %wq = pe.get_param @wq : tensor<64x64xf32>
    %q = pe.linear %h, %wq : tensor<?x50x64xf32>, tensor<64x64xf32> -> tensor<?x50x64xf32>
    %pos = pe.grid_positions rows(7) cols(7) special(1) : tensor<50x2xf32>
    %freqs = pe.rope_freqs kind(axial) dim(64) heads(4) base(100.0) : tensor<32x2xf32>
    %qr = pe.rope %q, %pos, %freqs mode(axial) : tensor<?x50x64xf32>, tensor<50x2xf32>, tensor<32x2xf32> -> tensor<?x50x64xf32>
    %o = pe.attention %qr, %qr, %q heads(4) scale(0.25) mask(none) : tensor<?x50x64xf32>, tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
    %x1 = pe.add %x, %o : tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
    %h2 = pe.layer_norm %x1, %g, %b epsilon(1.0e-6) : tensor<?x50x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x50x64xf32>
    %act = pe.gelu %h2 : tensor<?x50x64xf32> -> tensor<?x50x64xf32>
    %x2 = pe.add %x1, %act : tensor<?x50x64xf32>, tensor<?x50x64xf32> -> tensor<?x50x64xf32>
    %c = pe.select_token %x2 index(0) : tensor<?x50x64xf32> -> tensor<?x64xf32>
    %wh = pe.get_param @w_head : tensor<64x10xf32>
    %bh = pe.get_param @b_head : tensor<10xf32>
    %logits = pe.linear %c, %wh, %bh : tensor<?x64xf32>, tensor<64x10xf32>, tensor<10xf32> -> tensor<?x10xf32>
    %loss = pe.cross_entropy %logits, %label : tensor<?x10xf32>, tensor<?xi32> -> tensor<f32>
    return %loss, %logits : tensor<f32>, tensor<?x10xf32>
  }
}

// -----

// Cayley-STRING (dense and sparse skew), reflection RoPE and 1D / mixed RoPE.
// CHECK: pe.parameter @s_params : tensor<28xf32> {init = "zeros"}
// CHECK: pe.parameter @s_sparse : tensor<3xf32> {init = "zeros"}
// CHECK: pe.parameter @f1 : tensor<4x2xf32> {init = "normal", mean = 0.000000e+00 : f64, seed = 1 : i64, std = 1.000000e+00 : f64}
// CHECK: pe.parameter @f2 : tensor<4x2xf32> {init = "normal", mean = 0.000000e+00 : f64, seed = 2 : i64, std = 1.000000e+00 : f64}
// CHECK: pe.parameter @f_mixed : tensor<4x2xf32> {high = 1.000000e+00 : f64, init = "uniform", low = 0.000000e+00 : f64, seed = 5 : i64}
// CHECK-LABEL: func.func @forward(
// CHECK: %{{.*}} = pe.get_param @s_params : tensor<28xf32>
// CHECK: %{{.*}} = pe.skew %{{.*}} dim(8) : tensor<28xf32> -> tensor<8x8xf32>
// CHECK: %{{.*}} = pe.get_param @s_sparse : tensor<3xf32>
// CHECK: %{{.*}} = pe.sparse_skew %{{.*}} dim(4) fraction(5.000000e-01) seed(7) support([0, 2, 5]) : tensor<3xf32> -> tensor<4x4xf32>
// CHECK: %{{.*}} = pe.seq_positions length(16) special(1) : tensor<17x1xf32>
// CHECK: %{{.*}} = pe.rope_freqs kind(seq) dim(8) heads(2) base(1.000000e+04) : tensor<4x1xf32>
// CHECK: %{{.*}} = pe.rope %{{.*}}, %{{.*}}, %{{.*}} mode(seq) : tensor<?x17x8xf32>, tensor<17x1xf32>, tensor<4x1xf32> -> tensor<?x17x8xf32>
// CHECK: %{{.*}} = pe.cayley %{{.*}}, %{{.*}} : tensor<?x17x8xf32>, tensor<8x8xf32> -> tensor<?x17x8xf32>
// CHECK: %{{.*}} = pe.grid_positions rows(4) cols(4) special(1) : tensor<17x2xf32>
// CHECK: %{{.*}} = pe.get_param @f1 : tensor<4x2xf32>
// CHECK: %{{.*}} = pe.get_param @f2 : tensor<4x2xf32>
// CHECK: %{{.*}} = pe.householder %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x17x8xf32>, tensor<17x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<?x17x8xf32>
// CHECK: %{{.*}} = pe.get_param @f_mixed : tensor<4x2xf32>
// CHECK: %{{.*}} = pe.rope %{{.*}}, %{{.*}}, %{{.*}} mode(mixed) : tensor<?x17x8xf32>, tensor<17x2xf32>, tensor<4x2xf32> -> tensor<?x17x8xf32>

module {
  pe.parameter @s_params : tensor<28xf32> {init = "zeros"}
  pe.parameter @s_sparse : tensor<3xf32> {init = "zeros"}
  pe.parameter @f1 : tensor<4x2xf32> {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 1 : i64}
  pe.parameter @f2 : tensor<4x2xf32> {init = "normal", mean = 0.0 : f64, std = 1.0 : f64, seed = 2 : i64}
  pe.parameter @f_mixed : tensor<4x2xf32> {init = "uniform", low = 0.0 : f64, high = 1.0 : f64, seed = 5 : i64}

  func.func @forward(%x: tensor<?x17x8xf32> {pe.input = "x"}) -> (tensor<?x17x8xf32> {pe.output = "y"}) {
    %p = pe.get_param @s_params : tensor<28xf32>
    %s = pe.skew %p dim(8) : tensor<28xf32> -> tensor<8x8xf32>
    %ps = pe.get_param @s_sparse : tensor<3xf32>
    %ss = pe.sparse_skew %ps dim(4) fraction(0.5) seed(7) support([0, 2, 5]) : tensor<3xf32> -> tensor<4x4xf32>
    %pos1 = pe.seq_positions length(16) special(1) : tensor<17x1xf32>
    %fr = pe.rope_freqs kind(seq) dim(8) heads(2) base(10000.0) : tensor<4x1xf32>
    %r1 = pe.rope %x, %pos1, %fr mode(seq) : tensor<?x17x8xf32>, tensor<17x1xf32>, tensor<4x1xf32> -> tensor<?x17x8xf32>
    %u = pe.cayley %r1, %s : tensor<?x17x8xf32>, tensor<8x8xf32> -> tensor<?x17x8xf32>
    %pos2 = pe.grid_positions rows(4) cols(4) special(1) : tensor<17x2xf32>
    %a = pe.get_param @f1 : tensor<4x2xf32>
    %b = pe.get_param @f2 : tensor<4x2xf32>
    %h = pe.householder %u, %pos2, %a, %b : tensor<?x17x8xf32>, tensor<17x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<?x17x8xf32>
    %fm = pe.get_param @f_mixed : tensor<4x2xf32>
    %m = pe.rope %h, %pos2, %fm mode(mixed) : tensor<?x17x8xf32>, tensor<17x2xf32>, tensor<4x2xf32> -> tensor<?x17x8xf32>
    return %m : tensor<?x17x8xf32>
  }
}

// -----

// Relative-position attention through commuting generators, with the
// commutator regulariser added to the loss.
// CHECK: pe.parameter @gens : tensor<2x6xf32> {init = "normal", mean = 0.000000e+00 : f64, seed = 9 : i64, std = 1.000000e-01 : f64}
// CHECK: pe.optimizer {kind = "sgd", lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64}
// CHECK-LABEL: func.func @forward(
// CHECK: %{{.*}} = pe.get_param @gens : tensor<2x6xf32>
// CHECK: %{{.*}} = pe.skew %{{.*}} dim(4) : tensor<2x6xf32> -> tensor<2x4x4xf32>
// CHECK: %{{.*}} = pe.seq_positions length(10) : tensor<10x1xf32>
// CHECK: %{{.*}} = pe.grid_positions rows(2) cols(5) : tensor<10x2xf32>
// CHECK: %{{.*}} = pe.relative_positions %{{.*}} : tensor<10x2xf32> -> tensor<10x10x2xf32>
// CHECK: %{{.*}} = pe.generator_exp %{{.*}}, %{{.*}} : tensor<10x10x2xf32>, tensor<2x4x4xf32> -> tensor<10x10x4x4xf32>
// CHECK: %{{.*}} = pe.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads(2) scale(5.000000e-01) mask(causal) : tensor<?x10x8xf32>, tensor<?x10x8xf32>, tensor<?x10x8xf32>, tensor<10x10x4x4xf32> -> tensor<?x10x8xf32>
// CHECK: %{{.*}} = pe.relative_positions %{{.*}} : tensor<10x1xf32> -> tensor<10x10x1xf32>
// CHECK: %{{.*}} = pe.generator_exp %{{.*}}, %{{.*}} : tensor<10x2xf32>, tensor<2x4x4xf32> -> tensor<10x4x4xf32>
// CHECK: %{{.*}} = pe.apply_rotation %{{.*}}, %{{.*}} heads(2) : tensor<?x10x8xf32>, tensor<10x4x4xf32> -> tensor<?x10x8xf32>
// CHECK: %{{.*}} = pe.cross_entropy %{{.*}}, %{{.*}} : tensor<?x10x8xf32>, tensor<?x10xi32> -> tensor<f32>
// CHECK: %{{.*}} = pe.commutator_norm %{{.*}} : tensor<2x4x4xf32> -> tensor<f32>
// CHECK: %{{.*}} = pe.scale %{{.*}} factor(1.000000e-02) : tensor<f32> -> tensor<f32>
// CHECK: %{{.*}} = pe.add %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32> -> tensor<f32>

module {
  pe.parameter @gens : tensor<2x6xf32> {init = "normal", mean = 0.0 : f64, std = 0.1 : f64, seed = 9 : i64}
  pe.optimizer {kind = "sgd", lr = 0.1 : f64, momentum = 0.9 : f64}

  func.func @forward(%q: tensor<?x10x8xf32> {pe.input = "q"}, %labels: tensor<?x10xi32> {pe.input = "labels"}) -> (tensor<f32> {pe.output = "loss"}) {
    %g = pe.get_param @gens : tensor<2x6xf32>
    %L = pe.skew %g dim(4) : tensor<2x6xf32> -> tensor<2x4x4xf32>
    %pos = pe.seq_positions length(10) : tensor<10x1xf32>
    %pos2 = pe.grid_positions rows(2) cols(5) : tensor<10x2xf32>
    %r = pe.relative_positions %pos2 : tensor<10x2xf32> -> tensor<10x10x2xf32>
    %R = pe.generator_exp %r, %L : tensor<10x10x2xf32>, tensor<2x4x4xf32> -> tensor<10x10x4x4xf32>
    %o = pe.attention %q, %q, %q, %R heads(2) scale(0.5) mask(causal) : tensor<?x10x8xf32>, tensor<?x10x8xf32>, tensor<?x10x8xf32>, tensor<10x10x4x4xf32> -> tensor<?x10x8xf32>
    %r0 = pe.relative_positions %pos : tensor<10x1xf32> -> tensor<10x10x1xf32>
    %ra = pe.generator_exp %pos2, %L : tensor<10x2xf32>, tensor<2x4x4xf32> -> tensor<10x4x4xf32>
    %rot = pe.apply_rotation %o, %ra heads(2) : tensor<?x10x8xf32>, tensor<10x4x4xf32> -> tensor<?x10x8xf32>
    %ce = pe.cross_entropy %rot, %labels : tensor<?x10x8xf32>, tensor<?x10xi32> -> tensor<f32>
    %comm = pe.commutator_norm %L : tensor<2x4x4xf32> -> tensor<f32>
    %reg = pe.scale %comm factor(0.01) : tensor<f32> -> tensor<f32>
    %loss = pe.add %ce, %reg : tensor<f32>, tensor<f32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A pico GPT: token embedding, sinusoidal positions, skip-n attention, an
// SPD gate and the remaining elementwise ops.
// CHECK: pe.parameter @table : tensor<256x16xf32> {init = "normal", mean = 0.000000e+00 : f64, seed = 1 : i64, std = 2.000000e-02 : f64}
// CHECK: pe.parameter @gamma : tensor<16xf32> {init = "zeros"}
// CHECK: pe.parameter @gamma_t : tensor<8x16xf32> {init = "zeros"}
// CHECK: pe.dataset {context_length = 8 : i64, kind = "text", path = "corpus.txt"}
// CHECK-LABEL: func.func @forward(
// CHECK: %{{.*}} = pe.get_param @table : tensor<256x16xf32>
// CHECK: %{{.*}} = pe.token_embed %{{.*}}, %{{.*}} : tensor<?x8xi32>, tensor<256x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.sinusoidal length(8) dim(16) base(1.000000e+04) : tensor<8x16xf32>
// CHECK: %{{.*}} = pe.add %{{.*}}, %{{.*}} : tensor<?x8x16xf32>, tensor<8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.get_param @gamma : tensor<16xf32>
// CHECK: %{{.*}} = pe.spd_gate %{{.*}}, %{{.*}} : tensor<?x8x16xf32>, tensor<16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.get_param @gamma_t : tensor<8x16xf32>
// CHECK: %{{.*}} = pe.spd_gate %{{.*}}, %{{.*}} : tensor<?x8x16xf32>, tensor<8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.attention %{{.*}}, %{{.*}}, %{{.*}} heads(4) scale(5.000000e-01) mask(skip) skip_base(1) : tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.sub %{{.*}}, %{{.*}} : tensor<?x8x16xf32>, tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.mul %{{.*}}, %{{.*}} : tensor<16xf32>, tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.relu %{{.*}} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.gelu %{{.*}} approximate(true) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.scale %{{.*}} factor(2.000000e+00) bias(-1.000000e+00) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.mean %{{.*}} axis(1) : tensor<?x8x16xf32> -> tensor<?x16xf32>
// CHECK: %{{.*}} = pe.mean %{{.*}} : tensor<?x8x16xf32> -> tensor<f32>
// CHECK: %{{.*}} = pe.cross_entropy %{{.*}}, %{{.*}} {smoothing = 5.000000e-02 : f64} : tensor<?x8x16xf32>, tensor<?x8xi32> -> tensor<f32>
// CHECK: %{{.*}} = pe.add %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32> -> tensor<f32>

module {
  pe.parameter @table : tensor<256x16xf32> {init = "normal", mean = 0.0 : f64, std = 0.02 : f64, seed = 1 : i64}
  pe.parameter @gamma : tensor<16xf32> {init = "zeros"}
  pe.parameter @gamma_t : tensor<8x16xf32> {init = "zeros"}
  pe.dataset {kind = "text", path = "corpus.txt", context_length = 8 : i64}

  func.func @forward(%ids: tensor<?x8xi32> {pe.input = "ids"}, %next: tensor<?x8xi32> {pe.input = "targets"}) -> (tensor<f32> {pe.output = "loss"}, tensor<?x16xf32> {pe.output = "pooled"}) {
    %t = pe.get_param @table : tensor<256x16xf32>
    %e = pe.token_embed %ids, %t : tensor<?x8xi32>, tensor<256x16xf32> -> tensor<?x8x16xf32>
    %pe = pe.sinusoidal length(8) dim(16) base(10000.0) : tensor<8x16xf32>
    %x = pe.add %e, %pe : tensor<?x8x16xf32>, tensor<8x16xf32> -> tensor<?x8x16xf32>
    %g = pe.get_param @gamma : tensor<16xf32>
    %qg = pe.spd_gate %x, %g : tensor<?x8x16xf32>, tensor<16xf32> -> tensor<?x8x16xf32>
    %gt = pe.get_param @gamma_t : tensor<8x16xf32>
    %kg = pe.spd_gate %x, %gt : tensor<?x8x16xf32>, tensor<8x16xf32> -> tensor<?x8x16xf32>
    %o = pe.attention %qg, %kg, %x heads(4) scale(0.5) mask(skip) skip_base(1) : tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32> -> tensor<?x8x16xf32>
    %d = pe.sub %o, %x : tensor<?x8x16xf32>, tensor<?x8x16xf32> -> tensor<?x8x16xf32>
    %m = pe.mul %g, %d : tensor<16xf32>, tensor<?x8x16xf32> -> tensor<?x8x16xf32>
    %r = pe.relu %m : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
    %a = pe.gelu %r approximate(true) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
    %s = pe.scale %a factor(2.0) bias(-1.0) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
    %pooled = pe.mean %s axis(1) : tensor<?x8x16xf32> -> tensor<?x16xf32>
    %all = pe.mean %s : tensor<?x8x16xf32> -> tensor<f32>
    %ce = pe.cross_entropy %s, %next {smoothing = 0.05 : f64} : tensor<?x8x16xf32>, tensor<?x8xi32> -> tensor<f32>
    %loss = pe.add %ce, %all : tensor<f32>, tensor<f32> -> tensor<f32>
    return %loss, %pooled : tensor<f32>, tensor<?x16xf32>
  }
}

// -----

// Dropout per element, and per sample (drop-path); per_sample(false), the
// default, is not printed.
// CHECK-LABEL: func.func @dropout(
// CHECK: %{{.*}} = pe.dropout %{{.*}} p(1.000000e-01) stream(0) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.dropout %{{.*}} p(2.500000e-01) stream(7) per_sample(true) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK: %{{.*}} = pe.dropout %{{.*}} p(0.000000e+00) stream(2) : tensor<?x16xf32> -> tensor<?x16xf32>
func.func @dropout(%x: tensor<?x8x16xf32>, %y: tensor<?x16xf32>) -> (tensor<?x8x16xf32>, tensor<?x16xf32>) {
  %a = pe.dropout %x p(0.1) stream(0) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
  %b = pe.dropout %a p(0.25) stream(7) per_sample(true) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
  %c = pe.dropout %y p(0.0) stream(2) per_sample(false) : tensor<?x16xf32> -> tensor<?x16xf32>
  return %b, %c : tensor<?x8x16xf32>, tensor<?x16xf32>
}

// -----

// Attributes equal to their defaults are not printed.
// CHECK-LABEL: func.func @defaults(
// CHECK: %{{.*}} = pe.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<?x4xf32>
// CHECK: %{{.*}} = pe.gelu %{{.*}} : tensor<?x4xf32> -> tensor<?x4xf32>
// CHECK: %{{.*}} = pe.scale %{{.*}} factor(3.000000e+00) : tensor<?x4xf32> -> tensor<?x4xf32>
// CHECK: %{{.*}} = pe.seq_positions length(4) : tensor<4x1xf32>

func.func @defaults(%x: tensor<?x4xf32>, %g: tensor<4xf32>) -> tensor<?x4xf32> {
  %a = pe.layer_norm %x, %g, %g epsilon(1.0e-5) : tensor<?x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  %b = pe.gelu %a approximate(false) : tensor<?x4xf32> -> tensor<?x4xf32>
  %c = pe.scale %b factor(3.0) bias(0.0) : tensor<?x4xf32> -> tensor<?x4xf32>
  %p = pe.seq_positions length(4) special(0) : tensor<4x1xf32>
  return %c : tensor<?x4xf32>
}
