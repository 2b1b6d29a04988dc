//===- PEInterfaces.td - op interfaces of the pe dialect ---*- tablegen -*-===//

#ifndef STRINGC_DIALECT_PE_PEINTERFACES_TD
#define STRINGC_DIALECT_PE_PEINTERFACES_TD

include "mlir/IR/OpBase.td"

def PE_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::pe";
  let description = [{
    An op that knows its own derivative. The autodiff pass walks a forward
    graph backwards and asks each op, through this interface, for its
    vector-Jacobian product, built from ops of the `pe` dialect (and `arith`
    / `tensor` where needed) at the builder's insertion point.
  }];

  let methods = [
    InterfaceMethod<
      /*desc=*/[{
        Builds the vector-Jacobian product of this op; operandGrads gets one
        Value per operand (null for operands that get no gradient, e.g.
        integer ids). `resultGrads` holds one cotangent per result, of the
        result's type. Returns failure (after emitting a diagnostic) if the
        product cannot be built.
      }],
      /*retTy=*/"::mlir::LogicalResult",
      /*methodName=*/"buildVJP",
      /*args=*/(ins "::mlir::OpBuilder &":$builder,
                    "::mlir::ValueRange":$resultGrads,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)
    >,
    InterfaceMethod<
      /*desc=*/[{
        A copy of this op, built at the builder's insertion point, that also
        returns the saved results its VJP reads (pe.attention's log-sum-exp),
        or null when the op has none or returns them already. pe-autodiff
        calls it on every op of @gradients before it builds the backward,
        and replaces the op's results with the copy's leading ones.
      }],
      /*retTy=*/"::mlir::Operation *",
      /*methodName=*/"withSavedResults",
      /*args=*/(ins "::mlir::OpBuilder &":$builder),
      /*methodBody=*/[{}],
      /*defaultImplementation=*/[{ return nullptr; }]
    >
  ];
}

def PE_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::pe";
  let description = [{
    The arithmetic of a compute op, for `stringc --explain` and the CUDA
    launch report: a first-order count of its math (docs/dialect.md), a
    multiply-add counting 2. Every compute op implements it (its family's
    PE<Family>Ops.cpp), so an op added without a cost does not link.
  }];

  let methods = [
    InterfaceMethod<
      /*desc=*/[{
        The floating-point operations of one run of this op with the
        symbolic batch dimension (the `?` of tensor<?x...>) set to `batch`.
      }],
      /*retTy=*/"double",
      /*methodName=*/"estimateFlops",
      /*args=*/(ins "int64_t":$batch)
    >
  ];
}

#endif // STRINGC_DIALECT_PE_PEINTERFACES_TD
