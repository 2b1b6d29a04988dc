// The backward ops of docs/autodiff.md (PELayerOps.td, PEPositionOps.td) in
// generic form.
// @forward / @gradients: a tiny model (frozen w_in, layer norm, linear head,
// cross-entropy) and its backward pass written by hand as pe-autodiff builds
// it. @backward_ops: every backward op once (attention_grad with and
// without rel and with the skip mask, after the forward attention whose y and
// lse it reads; broadcast_to with `like`; mean_grad
// over the batch, over another axis and over everything), mapping random
// inputs to results named by pe.output. test_autodiff.py checks both against
// pe_torch_grad and autograd.
"builtin.module"() ({
  "pe.parameter"() <{frozen, init = "normal", mean = 0.000000e+00 : f64, seed = 1 : i64, std = 5.000000e-01 : f64, sym_name = "w_in", type = tensor<4x4xf32>}> : () -> ()
  "pe.parameter"() <{init = "ones", sym_name = "ln_g", type = tensor<4xf32>}> : () -> ()
  "pe.parameter"() <{init = "zeros", sym_name = "ln_b", type = tensor<4xf32>}> : () -> ()
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 2 : i64, std = 5.000000e-01 : f64, sym_name = "w_out", type = tensor<4x5xf32>}> : () -> ()
  "pe.parameter"() <{init = "zeros", sym_name = "b_out", type = tensor<5xf32>}> : () -> ()
  "func.func"() <{arg_attrs = [{pe.input = "x"}, {pe.input = "labels"}], function_type = (tensor<?x3x4xf32>, tensor<?x3xi32>) -> (tensor<f32>, tensor<?x3x5xf32>), res_attrs = [{pe.output = "loss"}, {pe.output = "logits"}], sym_name = "forward"}> ({
  ^bb0(%arg0: tensor<?x3x4xf32>, %arg1: tensor<?x3xi32>):
    %0 = "pe.get_param"() <{param = @w_in}> : () -> tensor<4x4xf32>
    %1 = "pe.linear"(%arg0, %0) : (tensor<?x3x4xf32>, tensor<4x4xf32>) -> tensor<?x3x4xf32>
    %2 = "pe.get_param"() <{param = @ln_g}> : () -> tensor<4xf32>
    %3 = "pe.get_param"() <{param = @ln_b}> : () -> tensor<4xf32>
    %4 = "pe.layer_norm"(%1, %2, %3) <{epsilon = 1.000000e-03 : f64}> : (tensor<?x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x3x4xf32>
    %5 = "pe.get_param"() <{param = @w_out}> : () -> tensor<4x5xf32>
    %6 = "pe.get_param"() <{param = @b_out}> : () -> tensor<5xf32>
    %7 = "pe.linear"(%4, %5, %6) : (tensor<?x3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<?x3x5xf32>
    %8 = "pe.cross_entropy"(%7, %arg1) : (tensor<?x3x5xf32>, tensor<?x3xi32>) -> tensor<f32>
    "func.return"(%8, %7) : (tensor<f32>, tensor<?x3x5xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{pe.input = "x"}, {pe.input = "labels"}], function_type = (tensor<?x3x4xf32>, tensor<?x3xi32>) -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4x5xf32>, tensor<5xf32>), res_attrs = [{pe.output = "loss"}, {pe.grad = "ln_g"}, {pe.grad = "ln_b"}, {pe.grad = "w_out"}, {pe.grad = "b_out"}], sym_name = "gradients"}> ({
  ^bb0(%arg0: tensor<?x3x4xf32>, %arg1: tensor<?x3xi32>):
    %0 = "pe.get_param"() <{param = @w_in}> : () -> tensor<4x4xf32>
    %1 = "pe.linear"(%arg0, %0) : (tensor<?x3x4xf32>, tensor<4x4xf32>) -> tensor<?x3x4xf32>
    %2 = "pe.get_param"() <{param = @ln_g}> : () -> tensor<4xf32>
    %3 = "pe.get_param"() <{param = @ln_b}> : () -> tensor<4xf32>
    %4 = "pe.layer_norm"(%1, %2, %3) <{epsilon = 1.000000e-03 : f64}> : (tensor<?x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x3x4xf32>
    %5 = "pe.get_param"() <{param = @w_out}> : () -> tensor<4x5xf32>
    %6 = "pe.get_param"() <{param = @b_out}> : () -> tensor<5xf32>
    %7 = "pe.linear"(%4, %5, %6) : (tensor<?x3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<?x3x5xf32>
    %8 = "pe.cross_entropy"(%7, %arg1) : (tensor<?x3x5xf32>, tensor<?x3xi32>) -> tensor<f32>
    %9 = "arith.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %10 = "pe.cross_entropy_grad"(%7, %arg1, %9) : (tensor<?x3x5xf32>, tensor<?x3xi32>, tensor<f32>) -> tensor<?x3x5xf32>
    %11 = "pe.linear_grad_weight"(%4, %10) : (tensor<?x3x4xf32>, tensor<?x3x5xf32>) -> tensor<4x5xf32>
    %12 = "pe.sum_to"(%10) : (tensor<?x3x5xf32>) -> tensor<5xf32>
    %13 = "pe.linear_grad_input"(%10, %5) : (tensor<?x3x5xf32>, tensor<4x5xf32>) -> tensor<?x3x4xf32>
    %14:3 = "pe.layer_norm_grad"(%1, %2, %13) <{epsilon = 1.000000e-03 : f64}> : (tensor<?x3x4xf32>, tensor<4xf32>, tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
    "func.return"(%8, %14#1, %14#2, %11, %12) : (tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{pe.input = "x"}, {pe.input = "dy"}, {pe.input = "dy5"}, {pe.input = "w"}, {pe.input = "g"}, {pe.input = "s"}, {pe.input = "image"}, {pe.input = "dyp"}, {pe.input = "ids"}, {pe.input = "dyb"}, {pe.input = "rel"}, {pe.input = "labels"}, {pe.input = "pos"}, {pe.input = "f1"}, {pe.input = "f2"}, {pe.input = "ds2"}, {pe.input = "ds"}, {pe.input = "r"}, {pe.input = "gens"}, {pe.input = "drot"}, {pe.input = "rot"}, {pe.input = "gamma"}], function_type = (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x5xf32>, tensor<4x5xf32>, tensor<4xf32>, tensor<f32>, tensor<?x2x4x4xf32>, tensor<?x4x5xf32>, tensor<?x3xi32>, tensor<?x4xf32>, tensor<3x3x2x2xf32>, tensor<?x3xi32>, tensor<3x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x4x4xf32>, tensor<4x4xf32>, tensor<3x3x2xf32>, tensor<2x2x2xf32>, tensor<3x3x2x2xf32>, tensor<3x2x2xf32>, tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<f32>, tensor<3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x2x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<4x5xf32>, tensor<?x3x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<8x5xf32>, tensor<5xf32>, tensor<7x4xf32>, tensor<?x2x4xf32>, tensor<4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<3x3x2x2xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x5xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x6xf32>, tensor<3xf32>, tensor<?x3x4xf32>, tensor<4x4xf32>, tensor<2x2x2xf32>, tensor<?x3x4xf32>, tensor<3x2x2xf32>, tensor<2x2x2xf32>, tensor<?x3x4xf32>, tensor<3x4xf32>, tensor<?x3x4xf32>, tensor<4x2x2xf32>), res_attrs = [{pe.output = "sum_to"}, {pe.output = "sum_all"}, {pe.output = "broadcast"}, {pe.output = "broadcast_like"}, {pe.output = "expand"}, {pe.output = "mean_batch"}, {pe.output = "mean_axis"}, {pe.output = "mean_all"}, {pe.output = "lin_dx"}, {pe.output = "lin_dw"}, {pe.output = "ln_dx"}, {pe.output = "ln_dg"}, {pe.output = "ln_db"}, {pe.output = "gelu"}, {pe.output = "gelu_erf"}, {pe.output = "relu"}, {pe.output = "pe_dw"}, {pe.output = "pe_db"}, {pe.output = "te"}, {pe.output = "ct_dx"}, {pe.output = "ct_dcls"}, {pe.output = "sel"}, {pe.output = "att_dq"}, {pe.output = "att_dk"}, {pe.output = "att_dv"}, {pe.output = "rel_dq"}, {pe.output = "rel_dk"}, {pe.output = "rel_dv"}, {pe.output = "rel_drel"}, {pe.output = "skip_dq"}, {pe.output = "skip_dk"}, {pe.output = "skip_dv"}, {pe.output = "ce"}, {pe.output = "rope"}, {pe.output = "hh_df1"}, {pe.output = "hh_df2"}, {pe.output = "skew"}, {pe.output = "sparse"}, {pe.output = "cay_dx"}, {pe.output = "cay_ds"}, {pe.output = "gexp"}, {pe.output = "rot_dx"}, {pe.output = "rot_dr"}, {pe.output = "comm"}, {pe.output = "spd_dx"}, {pe.output = "spd_dg"}, {pe.output = "skipg"}, {pe.output = "pairg"}], sym_name = "backward_ops"}> ({
  ^bb0(%arg0: tensor<?x3x4xf32>, %arg1: tensor<?x3x4xf32>, %arg2: tensor<?x3x5xf32>, %arg3: tensor<4x5xf32>, %arg4: tensor<4xf32>, %arg5: tensor<f32>, %arg6: tensor<?x2x4x4xf32>, %arg7: tensor<?x4x5xf32>, %arg8: tensor<?x3xi32>, %arg9: tensor<?x4xf32>, %arg10: tensor<3x3x2x2xf32>, %arg11: tensor<?x3xi32>, %arg12: tensor<3x2xf32>, %arg13: tensor<2x2xf32>, %arg14: tensor<2x2xf32>, %arg15: tensor<2x4x4xf32>, %arg16: tensor<4x4xf32>, %arg17: tensor<3x3x2xf32>, %arg18: tensor<2x2x2xf32>, %arg19: tensor<3x3x2x2xf32>, %arg20: tensor<3x2x2xf32>, %arg21: tensor<3x4xf32>):
    %0 = "arith.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1 = "pe.sum_to"(%arg1) : (tensor<?x3x4xf32>) -> tensor<3x4xf32>
    %2 = "pe.sum_to"(%arg1) : (tensor<?x3x4xf32>) -> tensor<f32>
    %3 = "pe.broadcast_to"(%arg4) : (tensor<4xf32>) -> tensor<3x4xf32>
    %4 = "pe.broadcast_to"(%arg5, %arg0) : (tensor<f32>, tensor<?x3x4xf32>) -> tensor<?x3x4xf32>
    %5 = "pe.expand_axis"(%arg1) <{axis = 2 : i64, size = 2 : i64}> : (tensor<?x3x4xf32>) -> tensor<?x3x2x4xf32>
    %6 = "pe.mean_grad"(%arg0, %arg21) <{axis = 0 : i64}> : (tensor<?x3x4xf32>, tensor<3x4xf32>) -> tensor<?x3x4xf32>
    %7 = "pe.mean_grad"(%arg0, %arg9) <{axis = 1 : i64}> : (tensor<?x3x4xf32>, tensor<?x4xf32>) -> tensor<?x3x4xf32>
    %8 = "pe.mean_grad"(%arg0, %arg5) : (tensor<?x3x4xf32>, tensor<f32>) -> tensor<?x3x4xf32>
    %9 = "pe.linear_grad_input"(%arg2, %arg3) : (tensor<?x3x5xf32>, tensor<4x5xf32>) -> tensor<?x3x4xf32>
    %10 = "pe.linear_grad_weight"(%arg0, %arg2) : (tensor<?x3x4xf32>, tensor<?x3x5xf32>) -> tensor<4x5xf32>
    %11:3 = "pe.layer_norm_grad"(%arg0, %arg4, %arg1) <{epsilon = 1.000000e-03 : f64}> : (tensor<?x3x4xf32>, tensor<4xf32>, tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
    %12 = "pe.gelu_grad"(%arg0, %arg1) <{approximate = true}> : (tensor<?x3x4xf32>, tensor<?x3x4xf32>) -> tensor<?x3x4xf32>
    %13 = "pe.gelu_grad"(%arg0, %arg1) : (tensor<?x3x4xf32>, tensor<?x3x4xf32>) -> tensor<?x3x4xf32>
    %14 = "pe.relu_grad"(%arg0, %arg1) : (tensor<?x3x4xf32>, tensor<?x3x4xf32>) -> tensor<?x3x4xf32>
    %15:2 = "pe.patch_embed_grad"(%arg6, %arg7) <{patch = 2 : i64}> : (tensor<?x2x4x4xf32>, tensor<?x4x5xf32>) -> (tensor<8x5xf32>, tensor<5xf32>)
    %16 = "pe.token_embed_grad"(%arg8, %arg1) : (tensor<?x3xi32>, tensor<?x3x4xf32>) -> tensor<7x4xf32>
    %17:2 = "pe.class_token_grad"(%arg1) : (tensor<?x3x4xf32>) -> (tensor<?x2x4xf32>, tensor<4xf32>)
    %18 = "pe.select_token_grad"(%arg9) <{index = 1 : i64}> : (tensor<?x4xf32>) -> tensor<?x3x4xf32>
    %39:2 = "pe.attention"(%arg0, %arg1, %9) <{heads = 2 : i64, mask = #pe.mask<causal>, scale = 5.000000e-01 : f64}> : (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<?x2x3xf32>)
    %19:3 = "pe.attention_grad"(%arg0, %arg1, %9, %39#0, %39#1, %arg1) <{heads = 2 : i64, mask = #pe.mask<causal>, scale = 5.000000e-01 : f64}> : (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x2x3xf32>, tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>)
    %40:2 = "pe.attention"(%arg0, %9, %arg1, %arg10) <{heads = 2 : i64, mask = #pe.mask<none>, scale = 7.500000e-01 : f64}> : (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<3x3x2x2xf32>) -> (tensor<?x3x4xf32>, tensor<?x2x3xf32>)
    %20:4 = "pe.attention_grad"(%arg0, %9, %arg1, %40#0, %40#1, %arg1, %arg10) <{heads = 2 : i64, mask = #pe.mask<none>, scale = 7.500000e-01 : f64}> : (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x2x3xf32>, tensor<?x3x4xf32>, tensor<3x3x2x2xf32>) -> (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<3x3x2x2xf32>)
    %41:2 = "pe.attention"(%arg1, %arg0, %arg0) <{heads = 2 : i64, mask = #pe.mask<skip>, scale = 1.000000e+00 : f64, skip_base = 1 : i64}> : (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<?x2x3xf32>)
    %21:3 = "pe.attention_grad"(%arg1, %arg0, %arg0, %41#0, %41#1, %arg1) <{heads = 2 : i64, mask = #pe.mask<skip>, scale = 1.000000e+00 : f64, skip_base = 1 : i64}> : (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x2x3xf32>, tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>)
    %22 = "pe.cross_entropy_grad"(%arg2, %arg11, %arg5) : (tensor<?x3x5xf32>, tensor<?x3xi32>, tensor<f32>) -> tensor<?x3x5xf32>
    %23 = "pe.rope_grad_freqs"(%arg0, %arg12, %arg13, %arg1) : (tensor<?x3x4xf32>, tensor<3x2xf32>, tensor<2x2xf32>, tensor<?x3x4xf32>) -> tensor<2x2xf32>
    %24:2 = "pe.householder_grad_freqs"(%arg0, %arg12, %arg13, %arg14, %arg1) : (tensor<?x3x4xf32>, tensor<3x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<?x3x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
    %25 = "pe.skew_grad"(%arg15) <{dim = 4 : i64}> : (tensor<2x4x4xf32>) -> tensor<2x6xf32>
    %26 = "pe.sparse_skew_grad"(%arg16) <{dim = 4 : i64, support = array<i64: 0, 2, 5>}> : (tensor<4x4xf32>) -> tensor<3xf32>
    %27:2 = "pe.cayley_grad"(%arg0, %arg16, %arg1) : (tensor<?x3x4xf32>, tensor<4x4xf32>, tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<4x4xf32>)
    %28 = "pe.generator_exp_grad"(%arg17, %arg18, %arg19) : (tensor<3x3x2xf32>, tensor<2x2x2xf32>, tensor<3x3x2x2xf32>) -> tensor<2x2x2xf32>
    %29:2 = "pe.apply_rotation_grad"(%arg0, %arg20, %arg1) <{heads = 2 : i64}> : (tensor<?x3x4xf32>, tensor<3x2x2xf32>, tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<3x2x2xf32>)
    %30 = "pe.commutator_norm_grad"(%arg18, %0) : (tensor<2x2x2xf32>, tensor<f32>) -> tensor<2x2x2xf32>
    %31:2 = "pe.spd_gate_grad"(%arg0, %arg21, %arg1) : (tensor<?x3x4xf32>, tensor<3x4xf32>, tensor<?x3x4xf32>) -> (tensor<?x3x4xf32>, tensor<3x4xf32>)
    %32 = "pe.skip_gather_grad"(%arg1) <{heads = 2 : i64, skip_base = 1 : i64}> : (tensor<?x3x4xf32>) -> tensor<?x3x4xf32>
    %33 = "pe.pair_gather_grad"(%arg19) <{index = array<i64: 0, 1, 3, 2, 0, 1, 3, 3, 0>}> : (tensor<3x3x2x2xf32>) -> tensor<4x2x2xf32>
    "func.return"(%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11#0, %11#1, %11#2, %12, %13, %14, %15#0, %15#1, %16, %17#0, %17#1, %18, %19#0, %19#1, %19#2, %20#0, %20#1, %20#2, %20#3, %21#0, %21#1, %21#2, %22, %23, %24#0, %24#1, %25, %26, %27#0, %27#1, %28, %29#0, %29#1, %30, %31#0, %31#1, %32, %33) : (tensor<3x4xf32>, tensor<f32>, tensor<3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x2x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<4x5xf32>, tensor<?x3x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<8x5xf32>, tensor<5xf32>, tensor<7x4xf32>, tensor<?x2x4xf32>, tensor<4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<3x3x2x2xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x4xf32>, tensor<?x3x5xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x6xf32>, tensor<3xf32>, tensor<?x3x4xf32>, tensor<4x4xf32>, tensor<2x2x2xf32>, tensor<?x3x4xf32>, tensor<3x2x2xf32>, tensor<2x2x2xf32>, tensor<?x3x4xf32>, tensor<3x4xf32>, tensor<?x3x4xf32>, tensor<4x2x2xf32>) -> ()
  }) : () -> ()
}) : () -> ()
