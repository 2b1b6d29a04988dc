// pe-autodiff: @gradients recomputes @forward and returns the loss and one
// gradient per trainable parameter, built from each op's VJP
// (docs/autodiff.md). One case per op family, then the cases where nothing
// may flow (frozen parameters, integer labels, positions), the warning for a
// parameter without effect, and the errors.
// RUN: string-opt --pe-autodiff -split-input-file -verify-diagnostics %s | FileCheck %s

// Linear layer and loss. @forward is untouched; the frozen parameter gets no
// result; the model input gets no linear_grad_input; the labels (i32) get
// nothing; the other output is dropped from @gradients.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<?x3xf32> {pe.output = "logits"})
// CHECK-NOT:     _grad
// CHECK:         return
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    %[[X:.*]]: tensor<?x4xf32> {pe.input = "x"}, %[[LABEL:.*]]: tensor<?xi32> {pe.input = "label"})
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<4x3xf32> {pe.grad = "w"}, tensor<3xf32> {pe.grad = "b"})
// CHECK:         %[[H:.*]] = pe.linear %[[X]], %{{.*}} :
// CHECK:         %[[Y:.*]] = pe.linear %[[H]], %{{.*}}, %{{.*}} :
// CHECK:         %[[LOSS:.*]] = pe.cross_entropy %[[Y]], %[[LABEL]]
// CHECK:         %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         %[[DY:.*]] = pe.cross_entropy_grad %[[Y]], %[[LABEL]], %[[SEED]] : tensor<?x3xf32>, tensor<?xi32>, tensor<f32> -> tensor<?x3xf32>
// CHECK-NOT:     pe.linear_grad_input
// CHECK:         %[[DW:.*]] = pe.linear_grad_weight %[[H]], %[[DY]] : tensor<?x4xf32>, tensor<?x3xf32> -> tensor<4x3xf32>
// CHECK:         %[[DB:.*]] = pe.sum_to %[[DY]] : tensor<?x3xf32> -> tensor<3xf32>
// CHECK:         return %[[LOSS]], %[[DW]], %[[DB]] : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>
module {
  pe.parameter @w : tensor<4x3xf32> {init = "zeros"}
  pe.parameter @frozen_w : tensor<4x4xf32> frozen {init = "ones"}
  pe.parameter @b : tensor<3xf32> {init = "zeros"}
  func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}, %label: tensor<?xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}, tensor<?x3xf32> {pe.output = "logits"}) {
    %f = pe.get_param @frozen_w : tensor<4x4xf32>
    %h = pe.linear %x, %f : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %w = pe.get_param @w : tensor<4x3xf32>
    %b = pe.get_param @b : tensor<3xf32>
    %y = pe.linear %h, %w, %b : tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
    %l = pe.cross_entropy %y, %label : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    return %l, %y : tensor<f32>, tensor<?x3xf32>
  }
}

// -----

// Dropout and drop-path: @forward (the evaluation) loses them, each used in
// place of its input; in @gradients each stays, and its VJP is the same op
// (same p, stream, per_sample: the same mask) on the incoming gradient.
// CHECK-LABEL: func.func @forward(
// CHECK-NOT:     pe.dropout
// CHECK:         %[[FH:.*]] = pe.linear %{{.*}}, %{{.*}} :
// CHECK-NEXT:    %[[FY:.*]] = pe.linear %[[FH]], %{{.*}} :
// CHECK-NOT:     pe.dropout
// CHECK:         return
// CHECK-LABEL: func.func @gradients(
// CHECK:         %[[H:.*]] = pe.linear
// CHECK:         %[[D:.*]] = pe.dropout %[[H]] p(2.000000e-01) stream(3) : tensor<?x4xf32> -> tensor<?x4xf32>
// CHECK:         %[[Y:.*]] = pe.linear %[[D]]
// CHECK:         %[[P:.*]] = pe.dropout %[[Y]] p(5.000000e-01) stream(4) per_sample(true) : tensor<?x3xf32> -> tensor<?x3xf32>
// CHECK:         %[[DY:.*]] = pe.cross_entropy_grad %[[P]]
// CHECK:         %[[DP:.*]] = pe.dropout %[[DY]] p(5.000000e-01) stream(4) per_sample(true) : tensor<?x3xf32> -> tensor<?x3xf32>
// CHECK:         %[[DD:.*]] = pe.linear_grad_input %[[DP]]
// CHECK:         pe.dropout %[[DD]] p(2.000000e-01) stream(3) : tensor<?x4xf32> -> tensor<?x4xf32>
module {
  pe.parameter @w1 : tensor<4x4xf32> {init = "zeros"}
  pe.parameter @w2 : tensor<4x3xf32> {init = "zeros"}
  func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}, %label: tensor<?xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %w1 = pe.get_param @w1 : tensor<4x4xf32>
    %w2 = pe.get_param @w2 : tensor<4x3xf32>
    %h = pe.linear %x, %w1 : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    %d = pe.dropout %h p(0.2) stream(3) : tensor<?x4xf32> -> tensor<?x4xf32>
    %y = pe.linear %d, %w2 : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x3xf32>
    %p = pe.dropout %y p(0.5) stream(4) per_sample(true) : tensor<?x3xf32> -> tensor<?x3xf32>
    %l = pe.cross_entropy %p, %label : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Norm and activations: layer_norm_grad (epsilon kept), gelu_grad (the tanh
// form kept), relu_grad, and linear_grad_input between layers.
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<8x8xf32> {pe.grad = "w1"}, tensor<8xf32> {pe.grad = "g"}, tensor<8xf32> {pe.grad = "beta"}, tensor<8x5xf32> {pe.grad = "w2"})
// CHECK:         %[[W1:.*]] = pe.get_param @w1
// CHECK:         %[[G:.*]] = pe.get_param @g
// CHECK:         %[[W2:.*]] = pe.get_param @w2
// CHECK:         %[[H:.*]] = pe.linear %{{.*}}, %[[W1]]
// CHECK:         %[[N:.*]] = pe.layer_norm %[[H]], %[[G]]
// CHECK:         %[[A:.*]] = pe.gelu %[[N]]
// CHECK:         %[[R:.*]] = pe.relu %[[A]]
// CHECK:         %[[DLOGITS:.*]] = pe.cross_entropy_grad
// CHECK:         %[[DR:.*]] = pe.linear_grad_input %[[DLOGITS]], %[[W2]] : tensor<?x6x5xf32>, tensor<8x5xf32> -> tensor<?x6x8xf32>
// CHECK:         %[[DW2:.*]] = pe.linear_grad_weight %[[R]], %[[DLOGITS]]
// CHECK:         %[[DA:.*]] = pe.relu_grad %[[A]], %[[DR]] : tensor<?x6x8xf32>, tensor<?x6x8xf32> -> tensor<?x6x8xf32>
// CHECK:         %[[DN:.*]] = pe.gelu_grad %[[N]], %[[DA]] approximate(true)
// CHECK:         %[[DH:.*]], %[[DG:.*]], %[[DBETA:.*]] = pe.layer_norm_grad %[[H]], %[[G]], %[[DN]] epsilon(9.9999999999999995E-7) : tensor<?x6x8xf32>, tensor<8xf32>, tensor<?x6x8xf32> -> (tensor<?x6x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK:         %[[DW1:.*]] = pe.linear_grad_weight %{{.*}}, %[[DH]]
// CHECK:         return %{{.*}}, %[[DW1]], %[[DG]], %[[DBETA]], %[[DW2]]
module {
  pe.parameter @w1 : tensor<8x8xf32> {init = "zeros"}
  pe.parameter @g : tensor<8xf32> {init = "ones"}
  pe.parameter @beta : tensor<8xf32> {init = "zeros"}
  pe.parameter @w2 : tensor<8x5xf32> {init = "zeros"}
  func.func @forward(%x: tensor<?x6x8xf32> {pe.input = "x"}, %label: tensor<?x6xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %w1 = pe.get_param @w1 : tensor<8x8xf32>
    %g = pe.get_param @g : tensor<8xf32>
    %beta = pe.get_param @beta : tensor<8xf32>
    %w2 = pe.get_param @w2 : tensor<8x5xf32>
    %h = pe.linear %x, %w1 : tensor<?x6x8xf32>, tensor<8x8xf32> -> tensor<?x6x8xf32>
    %n = pe.layer_norm %h, %g, %beta epsilon(1.000000e-06) : tensor<?x6x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<?x6x8xf32>
    %a = pe.gelu %n approximate(true) : tensor<?x6x8xf32> -> tensor<?x6x8xf32>
    %r = pe.relu %a : tensor<?x6x8xf32> -> tensor<?x6x8xf32>
    %y = pe.linear %r, %w2 : tensor<?x6x8xf32>, tensor<8x5xf32> -> tensor<?x6x5xf32>
    %l = pe.cross_entropy %y, %label : tensor<?x6x5xf32>, tensor<?x6xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Elementwise arithmetic with broadcast operands: their gradients are reduced
// with sum_to; sub negates with a scale by -1; mul multiplies by the other
// operand; scale by its factor (the bias has no effect).
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<6x8xf32> {pe.grad = "u"}, tensor<8xf32> {pe.grad = "v"}, tensor<8xf32> {pe.grad = "s"})
// CHECK:         %[[S:.*]] = pe.get_param @s
// CHECK:         %[[B:.*]] = pe.sub
// CHECK:         %[[DD:.*]] = pe.cross_entropy_grad
// CHECK:         %[[DC:.*]] = pe.scale %[[DD]] factor(5.000000e-01) : tensor<?x6x8xf32> -> tensor<?x6x8xf32>
// CHECK:         %[[DCB:.*]] = pe.mul %[[DC]], %[[B]] : tensor<?x6x8xf32>, tensor<?x6x8xf32> -> tensor<?x6x8xf32>
// CHECK:         %[[DB:.*]] = pe.mul %[[DC]], %[[S]] : tensor<?x6x8xf32>, tensor<8xf32> -> tensor<?x6x8xf32>
// CHECK:         %[[DS:.*]] = pe.sum_to %[[DCB]] : tensor<?x6x8xf32> -> tensor<8xf32>
// CHECK:         %[[SV:.*]] = pe.sum_to %[[DB]] : tensor<?x6x8xf32> -> tensor<8xf32>
// CHECK:         %[[DV:.*]] = pe.scale %[[SV]] factor(-1.000000e+00) : tensor<8xf32> -> tensor<8xf32>
// CHECK:         %[[DU:.*]] = pe.sum_to %[[DB]] : tensor<?x6x8xf32> -> tensor<6x8xf32>
// CHECK:         return %{{.*}}, %[[DU]], %[[DV]], %[[DS]]
module {
  pe.parameter @u : tensor<6x8xf32> {init = "zeros"}
  pe.parameter @v : tensor<8xf32> {init = "zeros"}
  pe.parameter @s : tensor<8xf32> {init = "ones"}
  func.func @forward(%x: tensor<?x6x8xf32> {pe.input = "x"}, %label: tensor<?x6xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %u = pe.get_param @u : tensor<6x8xf32>
    %v = pe.get_param @v : tensor<8xf32>
    %s = pe.get_param @s : tensor<8xf32>
    %a = pe.add %x, %u : tensor<?x6x8xf32>, tensor<6x8xf32> -> tensor<?x6x8xf32>
    %b = pe.sub %a, %v : tensor<?x6x8xf32>, tensor<8xf32> -> tensor<?x6x8xf32>
    %c = pe.mul %s, %b : tensor<8xf32>, tensor<?x6x8xf32> -> tensor<?x6x8xf32>
    %d = pe.scale %c factor(5.000000e-01) bias(1.000000e+00) : tensor<?x6x8xf32> -> tensor<?x6x8xf32>
    %l = pe.cross_entropy %d, %label : tensor<?x6x8xf32>, tensor<?x6xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Means over one axis or over everything: mean_grad of the forward operand
// (whose shape gives the count) and dy, with the same axis. A loss that is a
// sum: both terms get the seed.
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<4x3xf32> {pe.grad = "w"}, tensor<2x5x3xf32> {pe.grad = "m"})
// CHECK:         %[[H:.*]] = pe.linear
// CHECK:         %[[P:.*]] = pe.mean %[[H]] axis(1) : tensor<?x5x3xf32> -> tensor<?x3xf32>
// CHECK:         %[[M:.*]] = pe.get_param @m
// CHECK:         %[[M0:.*]] = pe.mean %[[M]] axis(0)
// CHECK:         %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         %[[DM0:.*]] = pe.mean_grad %[[M0]], %[[SEED]] : tensor<5x3xf32>, tensor<f32> -> tensor<5x3xf32>
// CHECK:         %[[DM:.*]] = pe.mean_grad %[[M]], %[[DM0]] axis(0) : tensor<2x5x3xf32>, tensor<5x3xf32> -> tensor<2x5x3xf32>
// CHECK:         %[[DP:.*]] = pe.cross_entropy_grad %[[P]], %{{.*}}, %[[SEED]]
// CHECK:         %[[DH:.*]] = pe.mean_grad %[[H]], %[[DP]] axis(1) : tensor<?x5x3xf32>, tensor<?x3xf32> -> tensor<?x5x3xf32>
// CHECK:         %[[DW:.*]] = pe.linear_grad_weight %{{.*}}, %[[DH]]
// CHECK:         return %{{.*}}, %[[DW]], %[[DM]]
module {
  pe.parameter @w : tensor<4x3xf32> {init = "zeros"}
  pe.parameter @m : tensor<2x5x3xf32> {init = "zeros"}
  func.func @forward(%x: tensor<?x5x4xf32> {pe.input = "x"}, %label: tensor<?xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %w = pe.get_param @w : tensor<4x3xf32>
    %h = pe.linear %x, %w : tensor<?x5x4xf32>, tensor<4x3xf32> -> tensor<?x5x3xf32>
    %p = pe.mean %h axis(1) : tensor<?x5x3xf32> -> tensor<?x3xf32>
    %ce = pe.cross_entropy %p, %label : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %m = pe.get_param @m : tensor<2x5x3xf32>
    %m0 = pe.mean %m axis(0) : tensor<2x5x3xf32> -> tensor<5x3xf32>
    %reg = pe.mean %m0 : tensor<5x3xf32> -> tensor<f32>
    %l = pe.add %ce, %reg : tensor<f32>, tensor<f32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Means over the dynamic batch dimension, of every element and over axis 0:
// the same mean_grad, which divides by B at run time. The two gradients of
// %y are summed.
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<4x3xf32> {pe.grad = "w"})
// CHECK:         %[[Y:.*]] = pe.linear
// CHECK:         %[[MB:.*]] = pe.mean %[[Y]] axis(0) : tensor<?x3xf32> -> tensor<3xf32>
// CHECK:         %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         %[[DMB:.*]] = pe.mean_grad %[[MB]], %[[SEED]] : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
// CHECK:         %[[DY0:.*]] = pe.mean_grad %[[Y]], %[[DMB]] axis(0) : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
// CHECK:         %[[DY1:.*]] = pe.mean_grad %[[Y]], %[[SEED]] : tensor<?x3xf32>, tensor<f32> -> tensor<?x3xf32>
// CHECK:         %[[DY:.*]] = pe.add %[[DY0]], %[[DY1]] : tensor<?x3xf32>, tensor<?x3xf32> -> tensor<?x3xf32>
// CHECK:         %[[DW:.*]] = pe.linear_grad_weight %{{.*}}, %[[DY]]
// CHECK:         return %{{.*}}, %[[DW]]
pe.parameter @w : tensor<4x3xf32> {init = "zeros"}
func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
  %w = pe.get_param @w : tensor<4x3xf32>
  %y = pe.linear %x, %w : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x3xf32>
  %a = pe.mean %y : tensor<?x3xf32> -> tensor<f32>
  %m = pe.mean %y axis(0) : tensor<?x3xf32> -> tensor<3xf32>
  %b = pe.mean %m : tensor<3xf32> -> tensor<f32>
  %l = pe.add %a, %b : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// ViT embeddings: select_token_grad, class_token_grad, patch_embed_grad (the
// image gets nothing).
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    %[[IMG:.*]]: tensor<?x1x8x8xf32> {pe.input = "image"}
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<16x8xf32> {pe.grad = "w_patch"}, tensor<8xf32> {pe.grad = "b_patch"}, tensor<8xf32> {pe.grad = "cls"})
// CHECK:         %[[DC:.*]] = pe.cross_entropy_grad
// CHECK:         %[[DX:.*]] = pe.select_token_grad %[[DC]] index(0) : tensor<?x8xf32> -> tensor<?x5x8xf32>
// CHECK:         %[[DE:.*]], %[[DCLS:.*]] = pe.class_token_grad %[[DX]] : tensor<?x5x8xf32> -> (tensor<?x4x8xf32>, tensor<8xf32>)
// CHECK:         %[[DW:.*]], %[[DB:.*]] = pe.patch_embed_grad %[[IMG]], %[[DE]] patch(4) : tensor<?x1x8x8xf32>, tensor<?x4x8xf32> -> (tensor<16x8xf32>, tensor<8xf32>)
// CHECK:         return %{{.*}}, %[[DW]], %[[DB]], %[[DCLS]]
module {
  pe.parameter @w_patch : tensor<16x8xf32> {init = "zeros"}
  pe.parameter @b_patch : tensor<8xf32> {init = "zeros"}
  pe.parameter @cls : tensor<8xf32> {init = "zeros"}
  func.func @forward(%img: tensor<?x1x8x8xf32> {pe.input = "image"}, %label: tensor<?xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %w = pe.get_param @w_patch : tensor<16x8xf32>
    %b = pe.get_param @b_patch : tensor<8xf32>
    %cls = pe.get_param @cls : tensor<8xf32>
    %e = pe.patch_embed %img, %w, %b patch(4) : tensor<?x1x8x8xf32>, tensor<16x8xf32>, tensor<8xf32> -> tensor<?x4x8xf32>
    %x = pe.class_token %e, %cls : tensor<?x4x8xf32>, tensor<8xf32> -> tensor<?x5x8xf32>
    %c = pe.select_token %x index(0) : tensor<?x5x8xf32> -> tensor<?x8xf32>
    %l = pe.cross_entropy %c, %label : tensor<?x8xf32>, tensor<?xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A GPT block: token_embed_grad (the ids get nothing), attention_grad, RoPE's
// input gradient as the rotation by the negated constant frequencies (no
// rope_grad_freqs: the table is a constant), and the embedding used three
// times, whose gradients are summed with pe.add. The frozen W_K gets no
// result and no linear_grad_weight.
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    %[[IDS:.*]]: tensor<?x4xi32> {pe.input = "ids"}
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<16x8xf32> {pe.grad = "wte"}, tensor<8x8xf32> {pe.grad = "wq"})
// CHECK:         %[[WQ:.*]] = pe.get_param @wq
// CHECK:         %[[WK:.*]] = pe.get_param @wk
// CHECK:         %[[X:.*]] = pe.token_embed %[[IDS]]
// CHECK:         %[[POS:.*]] = pe.seq_positions
// CHECK:         %[[F:.*]] = pe.rope_freqs
// CHECK:         %[[Q:.*]] = pe.rope
// CHECK:         %[[K:.*]] = pe.rope
// The forward attention returns its log-sum-exp in @gradients (withSavedResults).
// CHECK:         %[[Y:.*]], %[[LSE:.*]] = pe.attention %[[Q]], %[[K]], %[[X]] heads(2) scale(5.000000e-01) mask(causal) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32> -> tensor<?x4x8xf32>, tensor<?x2x4xf32>
// CHECK:         %[[DA:.*]] = pe.cross_entropy_grad
// CHECK:         %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = pe.attention_grad %[[Q]], %[[K]], %[[X]], %[[Y]], %[[LSE]], %[[DA]] heads(2) scale(5.000000e-01) mask(causal) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x2x4xf32>, tensor<?x4x8xf32> -> (tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>)
// CHECK:         %[[NF:.*]] = pe.scale %[[F]] factor(-1.000000e+00) : tensor<4x1xf32> -> tensor<4x1xf32>
// CHECK:         %[[DK0:.*]] = pe.rope %[[DK]], %[[POS]], %[[NF]] mode(seq)
// CHECK:         %[[NF2:.*]] = pe.scale %[[F]] factor(-1.000000e+00)
// CHECK:         %[[DQ0:.*]] = pe.rope %[[DQ]], %[[POS]], %[[NF2]] mode(seq)
// CHECK:         %[[DXK:.*]] = pe.linear_grad_input %[[DK0]], %[[WK]]
// CHECK:         %[[SUM1:.*]] = pe.add %[[DV]], %[[DXK]]
// CHECK:         %[[DXQ:.*]] = pe.linear_grad_input %[[DQ0]], %[[WQ]]
// CHECK:         %[[DWQ:.*]] = pe.linear_grad_weight %[[X]], %[[DQ0]]
// CHECK:         %[[SUM2:.*]] = pe.add %[[SUM1]], %[[DXQ]]
// CHECK:         %[[DT:.*]] = pe.token_embed_grad %[[IDS]], %[[SUM2]] : tensor<?x4xi32>, tensor<?x4x8xf32> -> tensor<16x8xf32>
// CHECK:         return %{{.*}}, %[[DT]], %[[DWQ]]
// CHECK-NOT:     pe.rope_grad_freqs
module {
  pe.parameter @wte : tensor<16x8xf32> {init = "zeros"}
  pe.parameter @wq : tensor<8x8xf32> {init = "zeros"}
  pe.parameter @wk : tensor<8x8xf32> frozen {init = "zeros"}
  func.func @forward(%ids: tensor<?x4xi32> {pe.input = "ids"}, %label: tensor<?x4xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %wte = pe.get_param @wte : tensor<16x8xf32>
    %wq = pe.get_param @wq : tensor<8x8xf32>
    %wk = pe.get_param @wk : tensor<8x8xf32>
    %x = pe.token_embed %ids, %wte : tensor<?x4xi32>, tensor<16x8xf32> -> tensor<?x4x8xf32>
    %pos = pe.seq_positions length(4) : tensor<4x1xf32>
    %f = pe.rope_freqs kind(seq) dim(8) heads(2) base(1.000000e+04) : tensor<4x1xf32>
    %q0 = pe.linear %x, %wq : tensor<?x4x8xf32>, tensor<8x8xf32> -> tensor<?x4x8xf32>
    %k0 = pe.linear %x, %wk : tensor<?x4x8xf32>, tensor<8x8xf32> -> tensor<?x4x8xf32>
    %q = pe.rope %q0, %pos, %f mode(seq) : tensor<?x4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32> -> tensor<?x4x8xf32>
    %k = pe.rope %k0, %pos, %f mode(seq) : tensor<?x4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32> -> tensor<?x4x8xf32>
    %a = pe.attention %q, %k, %x heads(2) scale(5.000000e-01) mask(causal) : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32> -> tensor<?x4x8xf32>
    %l = pe.cross_entropy %a, %label : tensor<?x4x8xf32>, tensor<?x4xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Learned rotary frequencies: RoPE (mixed) gives rope_grad_freqs; Householder
// RoPE's input gradient applies the reflections with f1 and f2 swapped, and
// householder_grad_freqs gives both frequency gradients. The grid positions
// get nothing.
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<?x5x8xf32> {pe.input = "x"}
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<4x2xf32> {pe.grad = "freqs"}, tensor<4x2xf32> {pe.grad = "f1"}, tensor<4x2xf32> {pe.grad = "f2"})
// CHECK:         %[[FREQS:.*]] = pe.get_param @freqs
// CHECK:         %[[F1:.*]] = pe.get_param @f1
// CHECK:         %[[F2:.*]] = pe.get_param @f2
// CHECK:         %[[POS:.*]] = pe.grid_positions
// CHECK:         %[[R:.*]] = pe.rope %[[X]], %[[POS]], %[[FREQS]] mode(mixed)
// CHECK:         %[[DH:.*]] = pe.cross_entropy_grad
// CHECK:         %[[DR:.*]] = pe.householder %[[DH]], %[[POS]], %[[F2]], %[[F1]] :
// CHECK:         %[[DF1:.*]], %[[DF2:.*]] = pe.householder_grad_freqs %[[R]], %[[POS]], %[[F1]], %[[F2]], %[[DH]] : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<?x5x8xf32> -> (tensor<4x2xf32>, tensor<4x2xf32>)
// CHECK:         %[[DFREQS:.*]] = pe.rope_grad_freqs %[[X]], %[[POS]], %[[FREQS]], %[[DR]] : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32>, tensor<?x5x8xf32> -> tensor<4x2xf32>
// CHECK:         return %{{.*}}, %[[DFREQS]], %[[DF1]], %[[DF2]]
module {
  pe.parameter @freqs : tensor<4x2xf32> {init = "zeros"}
  pe.parameter @f1 : tensor<4x2xf32> {init = "zeros"}
  pe.parameter @f2 : tensor<4x2xf32> {init = "zeros"}
  func.func @forward(%x: tensor<?x5x8xf32> {pe.input = "x"}, %label: tensor<?x5xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %freqs = pe.get_param @freqs : tensor<4x2xf32>
    %f1 = pe.get_param @f1 : tensor<4x2xf32>
    %f2 = pe.get_param @f2 : tensor<4x2xf32>
    %pos = pe.grid_positions rows(2) cols(2) special(1) : tensor<5x2xf32>
    %r = pe.rope %x, %pos, %freqs mode(mixed) : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32> -> tensor<?x5x8xf32>
    %h = pe.householder %r, %pos, %f1, %f2 : tensor<?x5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<?x5x8xf32>
    %l = pe.cross_entropy %h, %label : tensor<?x5x8xf32>, tensor<?x5xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Cayley-STRING with a dense and a sparse skew generator: cayley_grad, then
// skew_grad and sparse_skew_grad (the support kept).
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<6xf32> {pe.grad = "p"}, tensor<3xf32> {pe.grad = "sp"})
// CHECK:         %[[S:.*]] = pe.skew
// CHECK:         %[[T:.*]] = pe.sparse_skew
// CHECK:         %[[Y:.*]] = pe.cayley %{{.*}}, %[[S]]
// CHECK:         %[[DZ:.*]] = pe.cross_entropy_grad
// CHECK:         %[[DY:.*]], %[[DT:.*]] = pe.cayley_grad %[[Y]], %[[T]], %[[DZ]] : tensor<?x5x4xf32>, tensor<4x4xf32>, tensor<?x5x4xf32> -> (tensor<?x5x4xf32>, tensor<4x4xf32>)
// CHECK:         %{{.*}}, %[[DS:.*]] = pe.cayley_grad %{{.*}}, %[[S]], %[[DY]]
// CHECK:         %[[DSP:.*]] = pe.sparse_skew_grad %[[DT]] dim(4) support([0, 2, 5]) : tensor<4x4xf32> -> tensor<3xf32>
// CHECK:         %[[DP:.*]] = pe.skew_grad %[[DS]] dim(4) : tensor<4x4xf32> -> tensor<6xf32>
// CHECK:         return %{{.*}}, %[[DP]], %[[DSP]]
module {
  pe.parameter @p : tensor<6xf32> {init = "zeros"}
  pe.parameter @sp : tensor<3xf32> {init = "zeros"}
  func.func @forward(%x: tensor<?x5x4xf32> {pe.input = "x"}, %label: tensor<?x5xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %p = pe.get_param @p : tensor<6xf32>
    %sp = pe.get_param @sp : tensor<3xf32>
    %s = pe.skew %p dim(4) : tensor<6xf32> -> tensor<4x4xf32>
    %t = pe.sparse_skew %sp dim(4) fraction(5.000000e-01) seed(7) support([0, 2, 5]) : tensor<3xf32> -> tensor<4x4xf32>
    %y = pe.cayley %x, %s : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
    %z = pe.cayley %y, %t : tensor<?x5x4xf32>, tensor<4x4xf32> -> tensor<?x5x4xf32>
    %l = pe.cross_entropy %z, %label : tensor<?x5x4xf32>, tensor<?x5xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Commuting generators: relative attention (attention_grad with drel),
// absolute rotations (apply_rotation_grad), a per-position SPD gate
// (spd_gate_grad), the commutator regulariser (commutator_norm_grad of the
// scaled seed), and the generators' three gradients summed before skew_grad.
// The (relative) positions get nothing.
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<2x6xf32> {pe.grad = "gen"}, tensor<8x8xf32> {pe.grad = "wq"}, tensor<5x8xf32> {pe.grad = "gamma"})
// CHECK:         %[[GAMMA:.*]] = pe.get_param @gamma
// CHECK:         %[[POS:.*]] = pe.grid_positions
// CHECK:         %[[L:.*]] = pe.skew
// CHECK:         %[[REL:.*]] = pe.relative_positions %[[POS]]
// CHECK:         %[[R:.*]] = pe.generator_exp %[[REL]], %[[L]]
// CHECK:         %[[RABS:.*]] = pe.generator_exp %[[POS]], %[[L]]
// CHECK:         %[[Q0:.*]] = pe.linear
// CHECK:         %[[Q1:.*]] = pe.apply_rotation %[[Q0]], %[[RABS]]
// CHECK:         %[[Q:.*]] = pe.spd_gate %[[Q1]], %[[GAMMA]]
// CHECK:         %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         %[[DC:.*]] = pe.scale %[[SEED]] factor(1.000000e-02) : tensor<f32> -> tensor<f32>
// CHECK:         %[[DL1:.*]] = pe.commutator_norm_grad %[[L]], %[[DC]] : tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
// CHECK:         %[[DA:.*]] = pe.cross_entropy_grad
// CHECK:         %[[DQ:.*]], %{{.*}}, %{{.*}}, %[[DREL:.*]] = pe.attention_grad %[[Q]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[DA]], %[[R]] heads(2) scale(5.000000e-01) mask(none)
// CHECK-SAME:      -> (tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<5x5x4x4xf32>)
// CHECK:         %[[DQ1:.*]], %[[DGAMMA:.*]] = pe.spd_gate_grad %[[Q1]], %[[GAMMA]], %[[DQ]] : tensor<?x5x8xf32>, tensor<5x8xf32>, tensor<?x5x8xf32> -> (tensor<?x5x8xf32>, tensor<5x8xf32>)
// CHECK:         %[[DQ0:.*]], %[[DRABS:.*]] = pe.apply_rotation_grad %[[Q0]], %[[RABS]], %[[DQ1]] heads(2) : tensor<?x5x8xf32>, tensor<5x4x4xf32>, tensor<?x5x8xf32> -> (tensor<?x5x8xf32>, tensor<5x4x4xf32>)
// CHECK:         %[[DWQ:.*]] = pe.linear_grad_weight %{{.*}}, %[[DQ0]]
// CHECK:         %[[DL2:.*]] = pe.generator_exp_grad %[[POS]], %[[L]], %[[DRABS]] : tensor<5x2xf32>, tensor<2x4x4xf32>, tensor<5x4x4xf32> -> tensor<2x4x4xf32>
// CHECK:         %[[SUM:.*]] = pe.add %[[DL1]], %[[DL2]]
// CHECK:         %[[DL3:.*]] = pe.generator_exp_grad %[[REL]], %[[L]], %[[DREL]]
// CHECK:         %[[DL:.*]] = pe.add %[[SUM]], %[[DL3]]
// CHECK:         %[[DGEN:.*]] = pe.skew_grad %[[DL]] dim(4) : tensor<2x4x4xf32> -> tensor<2x6xf32>
// CHECK:         return %{{.*}}, %[[DGEN]], %[[DWQ]], %[[DGAMMA]]
module {
  pe.parameter @gen : tensor<2x6xf32> {init = "zeros"}
  pe.parameter @wq : tensor<8x8xf32> {init = "zeros"}
  pe.parameter @gamma : tensor<5x8xf32> {init = "zeros"}
  func.func @forward(%x: tensor<?x5x8xf32> {pe.input = "x"}, %label: tensor<?x5xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %gen = pe.get_param @gen : tensor<2x6xf32>
    %wq = pe.get_param @wq : tensor<8x8xf32>
    %gamma = pe.get_param @gamma : tensor<5x8xf32>
    %pos = pe.grid_positions rows(2) cols(2) special(1) : tensor<5x2xf32>
    %L = pe.skew %gen dim(4) : tensor<2x6xf32> -> tensor<2x4x4xf32>
    %rel = pe.relative_positions %pos : tensor<5x2xf32> -> tensor<5x5x2xf32>
    %R = pe.generator_exp %rel, %L : tensor<5x5x2xf32>, tensor<2x4x4xf32> -> tensor<5x5x4x4xf32>
    %Rabs = pe.generator_exp %pos, %L : tensor<5x2xf32>, tensor<2x4x4xf32> -> tensor<5x4x4xf32>
    %q0 = pe.linear %x, %wq : tensor<?x5x8xf32>, tensor<8x8xf32> -> tensor<?x5x8xf32>
    %q1 = pe.apply_rotation %q0, %Rabs heads(2) : tensor<?x5x8xf32>, tensor<5x4x4xf32> -> tensor<?x5x8xf32>
    %q = pe.spd_gate %q1, %gamma : tensor<?x5x8xf32>, tensor<5x8xf32> -> tensor<?x5x8xf32>
    %a = pe.attention %q, %x, %x, %R heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<5x5x4x4xf32> -> tensor<?x5x8xf32>
    %ce = pe.cross_entropy %a, %label : tensor<?x5x8xf32>, tensor<?x5xi32> -> tensor<f32>
    %c = pe.commutator_norm %L : tensor<2x4x4xf32> -> tensor<f32>
    %reg = pe.scale %c factor(1.000000e-02) : tensor<f32> -> tensor<f32>
    %l = pe.add %ce, %reg : tensor<f32>, tensor<f32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Nothing to differentiate: every parameter is frozen. @gradients returns
// the loss alone and builds no backward op.
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"})
// CHECK-NOT:     arith.constant
// CHECK-NOT:     _grad
// CHECK:         return %{{.*}} : tensor<f32>
module {
  pe.parameter @w : tensor<4x3xf32> frozen {init = "zeros"}
  func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}, %label: tensor<?xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
    %w = pe.get_param @w : tensor<4x3xf32>
    %y = pe.linear %x, %w : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x3xf32>
    %l = pe.cross_entropy %y, %label : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A trainable parameter the loss does not depend on (never read, or read
// only for another output) gets a zero gradient and a warning.
// CHECK-LABEL: func.func @gradients(
// CHECK-SAME:    -> (tensor<f32> {pe.output = "loss"}, tensor<2x3xf32> {pe.grad = "unread"}, tensor<4x3xf32> {pe.grad = "output_only"}, tensor<4x3xf32> {pe.grad = "w"})
// CHECK-NOT:     pe.get_param @output_only
// CHECK:         %[[DW:.*]] = pe.linear_grad_weight
// CHECK:         %[[Z1:.*]] = arith.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK:         %[[Z2:.*]] = arith.constant dense<0.000000e+00> : tensor<4x3xf32>
// CHECK:         return %{{.*}}, %[[Z1]], %[[Z2]], %[[DW]]
module {
  // expected-warning @+1 {{parameter 'unread' does not affect the loss; its gradient is 0}}
  pe.parameter @unread : tensor<2x3xf32> {init = "zeros"}
  // expected-warning @+1 {{parameter 'output_only' does not affect the loss; its gradient is 0}}
  pe.parameter @output_only : tensor<4x3xf32> {init = "zeros"}
  pe.parameter @w : tensor<4x3xf32> {init = "zeros"}
  func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}, %label: tensor<?xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}, tensor<?x3xf32> {pe.output = "other"}) {
    %w = pe.get_param @w : tensor<4x3xf32>
    %o = pe.get_param @output_only : tensor<4x3xf32>
    %y = pe.linear %x, %w : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x3xf32>
    %z = pe.linear %x, %o : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x3xf32>
    %l = pe.cross_entropy %y, %label : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    return %l, %z : tensor<f32>, tensor<?x3xf32>
  }
}

// -----

// An op without a VJP on the path from a parameter to the loss.
pe.parameter @w : tensor<4x3xf32> {init = "zeros"}
func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}, %label: tensor<?xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
  %w = pe.get_param @w : tensor<4x3xf32>
  %y = pe.linear %x, %w : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x3xf32>
  // expected-error @+1 {{'arith.mulf' op cannot differentiate: it lies on the path from a trainable parameter to the loss and does not implement DifferentiableOpInterface}}
  %s = arith.mulf %y, %y : tensor<?x3xf32>
  %l = pe.cross_entropy %s, %label : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Positions are constants: relative_positions has no VJP.
pe.parameter @pos : tensor<5x2xf32> {init = "zeros"}
func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
  %pos = pe.get_param @pos : tensor<5x2xf32>
  // expected-error @+1 {{'pe.relative_positions' op cannot differentiate: it lies on the path from a trainable parameter to the loss and does not implement DifferentiableOpInterface}}
  %rel = pe.relative_positions %pos : tensor<5x2xf32> -> tensor<5x5x2xf32>
  %l = pe.mean %rel : tensor<5x5x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// generator_exp differentiates its generators only, not its positions.
pe.parameter @r : tensor<5x2xf32> {init = "zeros"}
pe.parameter @gen : tensor<2x6xf32> {init = "zeros"}
func.func @forward(%x: tensor<?x5x8xf32> {pe.input = "x"}, %label: tensor<?x5xi32> {pe.input = "label"}) -> (tensor<f32> {pe.output = "loss"}) {
  %r = pe.get_param @r : tensor<5x2xf32>
  %gen = pe.get_param @gen : tensor<2x6xf32>
  %L = pe.skew %gen dim(4) : tensor<2x6xf32> -> tensor<2x4x4xf32>
  // expected-error @+1 {{'pe.generator_exp' op cannot differentiate with respect to operand #0, which depends on a trainable parameter}}
  %R = pe.generator_exp %r, %L : tensor<5x2xf32>, tensor<2x4x4xf32> -> tensor<5x4x4xf32>
  %y = pe.apply_rotation %x, %R heads(2) : tensor<?x5x8xf32>, tensor<5x4x4xf32> -> tensor<?x5x8xf32>
  %l = pe.cross_entropy %y, %label : tensor<?x5x8xf32>, tensor<?x5xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The pass runs once per module.
func.func @forward(%x: tensor<f32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
  return %x : tensor<f32>
}
// expected-error @+1 {{the module already has @gradients: pe-autodiff runs once per module}}
func.func @gradients(%x: tensor<f32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
  return %x : tensor<f32>
}

// -----

// expected-error @+1 {{the symbol @gradients is taken: pe-autodiff names the function it adds @gradients}}
pe.parameter @gradients : tensor<4xf32> {init = "zeros"}
func.func @forward(%x: tensor<f32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
  return %x : tensor<f32>
}

// -----

// expected-error @+1 {{pe-autodiff needs a func.func @forward}}
module {
  func.func @main(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

// expected-error @+1 {{'func.func' op the first result of @forward (the loss) must be tensor<f32>}}
func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}) -> (tensor<?x4xf32> {pe.output = "loss"}) {
  return %x : tensor<?x4xf32>
}

// -----

// expected-error @+1 {{'func.func' op @forward must have a body to differentiate}}
func.func private @forward(%x: tensor<?x4xf32>) -> tensor<f32>
