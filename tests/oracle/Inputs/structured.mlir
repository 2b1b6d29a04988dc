// The structured positional transforms on a [?, 3, 6] input: dense and sparse
// Cayley, Householder pairs, a per-position SPD gate, generator exponentials
// (relative attention and per-token rotation) and the commutator penalty.
"builtin.module"() ({
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 21 : i64, std = 3.000000e-01 : f64, sym_name = "s", type = tensor<15xf32>}> : () -> ()
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 22 : i64, std = 3.000000e-01 : f64, sym_name = "sp", type = tensor<3xf32>}> : () -> ()
  "pe.parameter"() <{init = "uniform", high = 1.000000e+00 : f64, low = -1.000000e+00 : f64, seed = 23 : i64, sym_name = "f1", type = tensor<3x1xf32>}> : () -> ()
  "pe.parameter"() <{init = "uniform", high = 1.000000e+00 : f64, low = -1.000000e+00 : f64, seed = 24 : i64, sym_name = "f2", type = tensor<3x1xf32>}> : () -> ()
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 25 : i64, std = 2.000000e-01 : f64, sym_name = "gamma", type = tensor<3x6xf32>}> : () -> ()
  "pe.parameter"() <{init = "normal", mean = 0.000000e+00 : f64, seed = 26 : i64, std = 5.000000e-01 : f64, sym_name = "gen", type = tensor<2x3xf32>}> : () -> ()
  "func.func"() <{arg_attrs = [{pe.input = "x"}], function_type = (tensor<?x3x6xf32>) -> (tensor<f32>, tensor<?x3x6xf32>), res_attrs = [{pe.output = "loss"}, {pe.output = "features"}], sym_name = "forward"}> ({
  ^bb0(%arg0: tensor<?x3x6xf32>):
    %0 = "pe.get_param"() <{param = @s}> : () -> tensor<15xf32>
    %1 = "pe.skew"(%0) <{dim = 6 : i64}> : (tensor<15xf32>) -> tensor<6x6xf32>
    %2 = "pe.cayley"(%arg0, %1) : (tensor<?x3x6xf32>, tensor<6x6xf32>) -> tensor<?x3x6xf32>
    %3 = "pe.get_param"() <{param = @sp}> : () -> tensor<3xf32>
    %4 = "pe.sparse_skew"(%3) <{dim = 6 : i64, fraction = 2.000000e-01 : f64, seed = 7 : i64, support = array<i64: 0, 7, 14>}> : (tensor<3xf32>) -> tensor<6x6xf32>
    %5 = "pe.cayley"(%2, %4) : (tensor<?x3x6xf32>, tensor<6x6xf32>) -> tensor<?x3x6xf32>
    %6 = "pe.seq_positions"() <{length = 2 : i64, special = 1 : i64}> : () -> tensor<3x1xf32>
    %7 = "pe.get_param"() <{param = @f1}> : () -> tensor<3x1xf32>
    %8 = "pe.get_param"() <{param = @f2}> : () -> tensor<3x1xf32>
    %9 = "pe.householder"(%5, %6, %7, %8) : (tensor<?x3x6xf32>, tensor<3x1xf32>, tensor<3x1xf32>, tensor<3x1xf32>) -> tensor<?x3x6xf32>
    %10 = "pe.get_param"() <{param = @gamma}> : () -> tensor<3x6xf32>
    %11 = "pe.spd_gate"(%9, %10) : (tensor<?x3x6xf32>, tensor<3x6xf32>) -> tensor<?x3x6xf32>
    %12 = "pe.grid_positions"() <{cols = 3 : i64, rows = 1 : i64}> : () -> tensor<3x2xf32>
    %13 = "pe.relative_positions"(%12) : (tensor<3x2xf32>) -> tensor<3x3x2xf32>
    %14 = "pe.get_param"() <{param = @gen}> : () -> tensor<2x3xf32>
    %15 = "pe.skew"(%14) <{dim = 3 : i64}> : (tensor<2x3xf32>) -> tensor<2x3x3xf32>
    %16 = "pe.generator_exp"(%13, %15) : (tensor<3x3x2xf32>, tensor<2x3x3xf32>) -> tensor<3x3x3x3xf32>
    %17 = "pe.attention"(%11, %11, %arg0, %16) <{heads = 2 : i64, mask = #pe.mask<none>, scale = 5.773503e-01 : f64}> : (tensor<?x3x6xf32>, tensor<?x3x6xf32>, tensor<?x3x6xf32>, tensor<3x3x3x3xf32>) -> tensor<?x3x6xf32>
    %18 = "pe.generator_exp"(%12, %15) : (tensor<3x2xf32>, tensor<2x3x3xf32>) -> tensor<3x3x3xf32>
    %19 = "pe.apply_rotation"(%17, %18) <{heads = 2 : i64}> : (tensor<?x3x6xf32>, tensor<3x3x3xf32>) -> tensor<?x3x6xf32>
    %20 = "pe.sub"(%19, %arg0) : (tensor<?x3x6xf32>, tensor<?x3x6xf32>) -> tensor<?x3x6xf32>
    %21 = "pe.mul"(%20, %20) : (tensor<?x3x6xf32>, tensor<?x3x6xf32>) -> tensor<?x3x6xf32>
    %22 = "pe.mean"(%21) <{axis = 1 : i64}> : (tensor<?x3x6xf32>) -> tensor<?x6xf32>
    %23 = "pe.mean"(%22) : (tensor<?x6xf32>) -> tensor<f32>
    %24 = "pe.commutator_norm"(%15) : (tensor<2x3x3xf32>) -> tensor<f32>
    %25 = "pe.scale"(%24) <{bias = 2.500000e-01 : f64, factor = 1.000000e-01 : f64}> : (tensor<f32>) -> tensor<f32>
    %26 = "pe.add"(%23, %25) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %27 = "pe.gelu"(%19) : (tensor<?x3x6xf32>) -> tensor<?x3x6xf32>
    "func.return"(%26, %27) : (tensor<f32>, tensor<?x3x6xf32>) -> ()
  }) : () -> ()
}) : () -> ()
