// A two-token-wide ViT step: patch embedding, CLS, axial RoPE attention,
// GELU (tanh form), CLS readout, cross-entropy. Generic form, as printed by
// string-opt --mlir-print-op-generic.
"builtin.module"() ({
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 1 : i64, std = 2.000000e-01 : f64, sym_name = "w_patch", type = tensor<4x8xf32>}> : () -> ()
  "pe.parameter"() <{init = "constant", sym_name = "b_patch", type = tensor<8xf32>, value = 1.000000e-01 : f64}> : () -> ()
  "pe.parameter"() <{init = "uniform", high = 5.000000e-01 : f64, low = -5.000000e-01 : f64, seed = 2 : i64, sym_name = "cls", type = tensor<8xf32>}> : () -> ()
  "pe.parameter"() <{init = "ones", sym_name = "ln_g", type = tensor<8xf32>}> : () -> ()
  "pe.parameter"() <{init = "zeros", sym_name = "ln_b", type = tensor<8xf32>}> : () -> ()
  "pe.parameter"() <{file = "weights.safetensors", frozen, init = "load", sym_name = "encoder.0.wq", tensor = "wq", type = tensor<8x8xf32>}> : () -> ()
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 3 : i64, std = 5.000000e-01 : f64, sym_name = "encoder.0.wk", type = tensor<8x8xf32>}> : () -> ()
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 4 : i64, std = 5.000000e-01 : f64, sym_name = "encoder.0.wv", type = tensor<8x8xf32>}> : () -> ()
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 5 : i64, std = 5.000000e-01 : f64, sym_name = "w_head", type = tensor<8x3xf32>}> : () -> ()
  "pe.parameter"() <{init = "zeros", sym_name = "b_head", type = tensor<3xf32>}> : () -> ()
  "pe.optimizer"() <{clip_norm = 1.000000e+00 : f64, kind = "adamw", lr = 2.000000e-03 : f64, schedule = "warmup_cosine", warmup_steps = 10 : i64}> : () -> ()
  "pe.dataset"() <{kind = "idx", path = "/usr/share/datasets/fashion-mnist"}> : () -> ()
  "func.func"() <{arg_attrs = [{pe.input = "image"}, {pe.input = "label"}], function_type = (tensor<?x1x4x4xf32>, tensor<?xi32>) -> (tensor<f32>, tensor<?x3xf32>), res_attrs = [{pe.output = "loss"}, {pe.output = "logits"}], sym_name = "forward"}> ({
  ^bb0(%arg0: tensor<?x1x4x4xf32>, %arg1: tensor<?xi32>):
    %0 = "pe.get_param"() <{param = @w_patch}> : () -> tensor<4x8xf32>
    %1 = "pe.get_param"() <{param = @b_patch}> : () -> tensor<8xf32>
    %2 = "pe.get_param"() <{param = @cls}> : () -> tensor<8xf32>
    %3 = "pe.patch_embed"(%arg0, %0, %1) <{patch = 2 : i64}> : (tensor<?x1x4x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<?x4x8xf32>
    %4 = "pe.class_token"(%3, %2) : (tensor<?x4x8xf32>, tensor<8xf32>) -> tensor<?x5x8xf32>
    %5 = "pe.grid_positions"() <{cols = 2 : i64, rows = 2 : i64, special = 1 : i64}> : () -> tensor<5x2xf32>
    %6 = "pe.rope_freqs"() <{base = 1.000000e+02 : f64, dim = 8 : i64, heads = 2 : i64, kind = #pe.freqs_kind<axial>}> : () -> tensor<4x2xf32>
    %7 = "pe.get_param"() <{param = @ln_g}> : () -> tensor<8xf32>
    %8 = "pe.get_param"() <{param = @ln_b}> : () -> tensor<8xf32>
    %9 = "pe.layer_norm"(%4, %7, %8) <{epsilon = 1.000000e-06 : f64}> : (tensor<?x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x5x8xf32>
    %10 = "pe.get_param"() <{param = @encoder.0.wq}> : () -> tensor<8x8xf32>
    %11 = "pe.get_param"() <{param = @encoder.0.wk}> : () -> tensor<8x8xf32>
    %12 = "pe.get_param"() <{param = @encoder.0.wv}> : () -> tensor<8x8xf32>
    %13 = "pe.linear"(%9, %10) : (tensor<?x5x8xf32>, tensor<8x8xf32>) -> tensor<?x5x8xf32>
    %14 = "pe.linear"(%9, %11) : (tensor<?x5x8xf32>, tensor<8x8xf32>) -> tensor<?x5x8xf32>
    %15 = "pe.linear"(%9, %12) : (tensor<?x5x8xf32>, tensor<8x8xf32>) -> tensor<?x5x8xf32>
    %16 = "pe.rope"(%13, %5, %6) <{mode = #pe.rope_mode<axial>}> : (tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32>) -> tensor<?x5x8xf32>
    %17 = "pe.rope"(%14, %5, %6) <{mode = #pe.rope_mode<axial>}> : (tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32>) -> tensor<?x5x8xf32>
    %18 = "pe.attention"(%16, %17, %15) <{heads = 2 : i64, mask = #pe.mask<none>, scale = 5.000000e-01 : f64}> : (tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>) -> tensor<?x5x8xf32>
    %19 = "pe.add"(%4, %18) : (tensor<?x5x8xf32>, tensor<?x5x8xf32>) -> tensor<?x5x8xf32>
    %20 = "pe.gelu"(%19) <{approximate = true}> : (tensor<?x5x8xf32>) -> tensor<?x5x8xf32>
    %21 = "pe.select_token"(%20) <{index = 0 : i64}> : (tensor<?x5x8xf32>) -> tensor<?x8xf32>
    %22 = "pe.get_param"() <{param = @w_head}> : () -> tensor<8x3xf32>
    %23 = "pe.get_param"() <{param = @b_head}> : () -> tensor<3xf32>
    %24 = "pe.linear"(%21, %22, %23) : (tensor<?x8xf32>, tensor<8x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
    %25 = "pe.cross_entropy"(%24, %arg1) : (tensor<?x3xf32>, tensor<?xi32>) -> tensor<f32>
    "func.return"(%25, %24) : (tensor<f32>, tensor<?x3xf32>) -> ()
  }) : () -> ()
}) : () -> ()
