// Byte-level GPT step: token embedding + sinusoidal table, skip-n attention
// (scale as a hex float), then 1D RoPE with causal attention and a ReLU
// readout. Carries debug locations and location aliases.
#loc0 = loc("gpt_tiny.pe":1:1)
"builtin.module"() ({
  "func.func"() <{arg_attrs = [{pe.input = "tokens"}, {pe.input = "targets"}], function_type = (tensor<?x6xi32>, tensor<?x6xi32>) -> (tensor<f32>, tensor<?x6x10xf32>), res_attrs = [{pe.output = "loss"}, {pe.output = "logits"}], sym_name = "forward"}> ({
  ^bb0(%arg0: tensor<?x6xi32> loc(#loc0), %arg1: tensor<?x6xi32> loc(#loc0)):
    %0 = "pe.get_param"() <{param = @wte}> : () -> tensor<10x8xf32> loc(#loc1)
    %1 = "pe.token_embed"(%arg0, %0) : (tensor<?x6xi32>, tensor<10x8xf32>) -> tensor<?x6x8xf32> loc("gpt_tiny.pe":20:9)
    %2 = "pe.sinusoidal"() <{base = 1.000000e+04 : f64, dim = 8 : i64, length = 6 : i64}> : () -> tensor<6x8xf32>
    %3 = "pe.add"(%1, %2) : (tensor<?x6x8xf32>, tensor<6x8xf32>) -> tensor<?x6x8xf32>
    %4 = "pe.get_param"() <{param = @decoder.0.wq}> : () -> tensor<8x8xf32>
    %5 = "pe.get_param"() <{param = @decoder.0.wk}> : () -> tensor<8x8xf32>
    %6 = "pe.get_param"() <{param = @decoder.0.wv}> : () -> tensor<8x8xf32>
    %7 = "pe.linear"(%3, %4) : (tensor<?x6x8xf32>, tensor<8x8xf32>) -> tensor<?x6x8xf32>
    %8 = "pe.linear"(%3, %5) : (tensor<?x6x8xf32>, tensor<8x8xf32>) -> tensor<?x6x8xf32>
    %9 = "pe.linear"(%3, %6) : (tensor<?x6x8xf32>, tensor<8x8xf32>) -> tensor<?x6x8xf32>
    %10 = "pe.attention"(%7, %8, %9) <{heads = 2 : i64, mask = #pe.mask<skip>, scale = 0x3FE0000000000000 : f64, skip_base = 1 : i64}> : (tensor<?x6x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32>) -> tensor<?x6x8xf32>
    %11 = "pe.add"(%3, %10) : (tensor<?x6x8xf32>, tensor<?x6x8xf32>) -> tensor<?x6x8xf32>
    %12 = "pe.seq_positions"() <{length = 6 : i64}> : () -> tensor<6x1xf32>
    %13 = "pe.rope_freqs"() <{base = 1.000000e+04 : f64, dim = 8 : i64, heads = 2 : i64, kind = #pe.freqs_kind<seq>}> : () -> tensor<4x1xf32>
    %14 = "pe.linear"(%11, %4) : (tensor<?x6x8xf32>, tensor<8x8xf32>) -> tensor<?x6x8xf32>
    %15 = "pe.linear"(%11, %5) : (tensor<?x6x8xf32>, tensor<8x8xf32>) -> tensor<?x6x8xf32>
    %16 = "pe.rope"(%14, %12, %13) <{mode = #pe.rope_mode<seq>}> : (tensor<?x6x8xf32>, tensor<6x1xf32>, tensor<4x1xf32>) -> tensor<?x6x8xf32>
    %17 = "pe.rope"(%15, %12, %13) <{mode = #pe.rope_mode<seq>}> : (tensor<?x6x8xf32>, tensor<6x1xf32>, tensor<4x1xf32>) -> tensor<?x6x8xf32>
    %18 = "pe.attention"(%16, %17, %11) <{heads = 2 : i64, mask = #pe.mask<causal>, scale = 3.535534e-01 : f64}> : (tensor<?x6x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32>) -> tensor<?x6x8xf32>
    %19 = "pe.relu"(%18) : (tensor<?x6x8xf32>) -> tensor<?x6x8xf32>
    %20 = "pe.get_param"() <{param = @w_out}> : () -> tensor<8x10xf32>
    %21 = "pe.linear"(%19, %20) : (tensor<?x6x8xf32>, tensor<8x10xf32>) -> tensor<?x6x10xf32>
    %22 = "pe.cross_entropy"(%21, %arg1) : (tensor<?x6x10xf32>, tensor<?x6xi32>) -> tensor<f32>
    "func.return"(%22, %21) : (tensor<f32>, tensor<?x6x10xf32>) -> ()
  }) : () -> () loc(#loc0)
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 11 : i64, std = 1.000000e+00 : f64, sym_name = "wte", type = tensor<10x8xf32>}> : () -> ()
  "pe.parameter"() <{frozen, init = "normal", mean = 0.000000e+00 : f64, seed = 12 : i64, std = 5.000000e-01 : f64, sym_name = "decoder.0.wq", type = tensor<8x8xf32>}> : () -> ()
  "pe.parameter"() <{frozen, init = "normal", mean = 0.000000e+00 : f64, seed = 13 : i64, std = 5.000000e-01 : f64, sym_name = "decoder.0.wk", type = tensor<8x8xf32>}> : () -> ()
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 14 : i64, std = 5.000000e-01 : f64, sym_name = "decoder.0.wv", type = tensor<8x8xf32>}> : () -> ()
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 15 : i64, std = 5.000000e-01 : f64, sym_name = "w_out", type = tensor<8x10xf32>}> : () -> ()
}) : () -> () loc(#loc0)
#loc1 = loc("gpt_tiny.pe":18:1)
