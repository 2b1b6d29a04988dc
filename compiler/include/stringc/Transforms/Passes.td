//===- Passes.td - the passes of stringc -------------------*- tablegen -*-===//
//
// Graph passes over the pe dialect. One pass per file in
// compiler/lib/Transforms, named after the pass.
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_PASSES_TD
#define STRINGC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"pe-autodiff", "::mlir::ModuleOp"> {
  let summary = "adds @gradients: the loss and its gradient w.r.t. every "
                "trainable parameter";
  let description = [{
    Reverse-mode differentiation of the module's `func.func @forward`
    (docs/autodiff.md). The pass adds

    ```mlir
    func.func @gradients(<the inputs of @forward>)
        -> (tensor<f32> {pe.output = "loss"},
            tensor<...> {pe.grad = "encoder.0.wq"}, ...)
    ```

    which recomputes the forward pass and returns the loss, then one gradient
    per trainable (not `frozen`) `pe.parameter`, in the order the parameters
    are declared. `@forward` becomes the evaluation program: its
    `pe.dropout` ops (which stay in `@gradients`) are replaced by their
    inputs; it is otherwise left untouched.

    Only active values get gradients: those that depend on a trainable
    parameter and on which the loss depends. Each active op builds its
    vector-Jacobian product through `DifferentiableOpInterface`, walking the
    forward ops in reverse from the seed `1.0`; gradients of a value used
    several times are summed with `pe.add`. Forward values that no gradient
    needs are removed from `@gradients`.

    A trainable parameter the loss does not depend on gets a zero gradient
    (`arith.constant dense<0.0>`) and a warning on its `pe.parameter`.
    Errors: a module without `@forward`, or that already has `@gradients`;
    an active op that does not implement the interface, or whose VJP gives
    no gradient for an active operand.
  }];
  let dependentDialects = [
    "::mlir::pe::PEDialect",
    "::mlir::func::FuncDialect",
    "::mlir::arith::ArithDialect",
  ];
}

// The positional-encoding rewrites (docs/passes.md), one file per group.
// Every rewrite pass is a ModuleOp pass with an `explain` option: when set,
// each rewrite that fires is reported as a remark (stringc/Transforms/Explain.h).
include "stringc/Transforms/AlgebraicPasses.td"
include "stringc/Transforms/GatherPasses.td"
include "stringc/Transforms/FusionPasses.td"

#endif // STRINGC_TRANSFORMS_PASSES_TD
