//===- OptimizerKernels.cpp - AdamW over the flat buffers, gradient norm --===//
//
// `pe_adamw` updates the flat parameter buffer and its moments in one
// grid-stride pass, exactly the formula of runtime/src/core/Optimizer.cpp
// (decoupled weight decay, bias corrections bc1 = 1 - beta1^t and
// bc2 = 1 - beta2^t computed by the host in double, the clipping factor as
// `grad_scale`), evaluated in f32. The runtime launches it once per maximal
// run of trainable parameters (frozen ones are never touched).
//
// `pe_sgd` is SGD with momentum and decoupled-into-the-gradient weight decay
// over the same flat buffers, Optimizer.cpp's formula
// (u = momentum u + grad_scale g + wd w, w -= lr u), evaluated in f64 from
// the f32 values and hyperparameters and rounded once when stored, as the
// CPU does (so the two differ only by the hyperparameters' f32 rounding).
//
// `pe_sumsq_partials` is the first half of the global gradient norm: one
// warp per block strides over the buffer and lane 0 writes the block's sum of
// squares to partials[blockIdx.x]; the host (or a second launch over the
// partials) adds the gridDim.x partials.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"
#include "OpKernelUtil.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace stringc::cudagen {

void appendOptimizerKernels(std::vector<KernelDef> &defs) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64, F = ParamKind::F32;

  KernelSpec adamw;
  adamw.name = "pe_adamw";
  adamw.peOp = "pe.optimizer";
  adamw.params = {{"param", P}, {"m", P},     {"v", P},       {"grad", P},
                  {"n", I},     {"lr", F},    {"beta1", F},   {"beta2", F},
                  {"eps", F},   {"weight_decay", F}, {"bc1", F}, {"bc2", F},
                  {"grad_scale", F}};
  defs.push_back({adamw, [](KernelBuilder &k) {
                    Value param = k.arg(0), mBuf = k.arg(1), vBuf = k.arg(2), grad = k.arg(3);
                    Value lr = k.arg(5), b1 = k.arg(6), b2 = k.arg(7), eps = k.arg(8),
                          wd = k.arg(9), bc1 = k.arg(10), bc2 = k.arg(11), scale = k.arg(12);
                    Value one = k.f32(1.0);
                    k.forGridStride(k.arg(4), [&](Value i) {
                      Value g = k.mul(scale, k.load(grad, i));
                      Value w = k.load(param, i);
                      Value m = k.add(k.mul(b1, k.load(mBuf, i)), k.mul(k.sub(one, b1), g));
                      Value v = k.add(k.mul(b2, k.load(vBuf, i)),
                                      k.mul(k.sub(one, b2), k.mul(g, g)));
                      k.store(m, mBuf, i);
                      k.store(v, vBuf, i);
                      Value denom = k.add(k.sqrtRn(k.div(v, bc2)), eps);
                      Value update = k.add(k.div(k.div(m, bc1), denom), k.mul(wd, w));
                      k.store(k.sub(w, k.mul(lr, update)), param, i);
                    });
                  }});

  KernelSpec sgd;
  sgd.name = "pe_sgd";
  sgd.peOp = "pe.optimizer";
  sgd.params = {{"param", P},    {"u", P},  {"grad", P},          {"n", I},
                {"lr", F},       {"momentum", F}, {"weight_decay", F}, {"grad_scale", F}};
  defs.push_back({sgd, [](KernelBuilder &k) {
                    Value param = k.arg(0), uBuf = k.arg(1), grad = k.arg(2);
                    Value lr = f32ToF64(k, k.arg(4)), mu = f32ToF64(k, k.arg(5)),
                          wd = f32ToF64(k, k.arg(6)), scale = f32ToF64(k, k.arg(7));
                    k.forGridStride(k.arg(3), [&](Value i) {
                      Value g = k.mul(scale, f32ToF64(k, k.load(grad, i)));
                      Value w = f32ToF64(k, k.load(param, i));
                      Value u = k.add(k.add(k.mul(mu, f32ToF64(k, k.load(uBuf, i))), g),
                                      k.mul(wd, w));
                      k.store(f64ToF32(k, u), uBuf, i);
                      k.store(f64ToF32(k, k.sub(w, k.mul(lr, u))), param, i);
                    });
                  }});

  KernelSpec sumsq;
  sumsq.name = "pe_sumsq_partials";
  sumsq.peOp = "pe.optimizer";
  sumsq.params = {{"partials", P}, {"x", P}, {"n", I}};
  sumsq.grid = GridRule::Partials;
  sumsq.blockX = 32;
  defs.push_back({sumsq, [](KernelBuilder &k) {
                    OpBuilder &b = k.builder();
                    Value x = k.arg(1), n = k.arg(2);
                    Value lane = k.threadId(gpu::Dimension::x);
                    Value first = k.add(k.mul(k.blockId(gpu::Dimension::x), k.i64(32)), lane);
                    Value step = k.mul(k.gridDim(gpu::Dimension::x), k.i64(32));
                    ValueRange acc = k.forLoop(first, n, step, {k.f32(0.0)},
                                               [&](Value i, ValueRange sum) {
                                                 Value xi = k.load(x, i);
                                                 return SmallVector<Value>{
                                                     k.add(sum[0], k.mul(xi, xi))};
                                               });
                    Value total = k.warpSum(acc[0]);
                    Value lane0 = b.create<arith::CmpIOp>(k.location(), arith::CmpIPredicate::eq,
                                                          lane, k.i64(0));
                    k.ifThen(lane0,
                             [&] { k.store(total, k.arg(0), k.blockId(gpu::Dimension::x)); });
                  }});
}

} // namespace stringc::cudagen
