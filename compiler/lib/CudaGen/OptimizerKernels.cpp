//===- OptimizerKernels.cpp - the optimizer step on the device -----------===//
//
// A training step's optimizer runs on the device without the host: after
// @gradients,
//
// 1. `pe_sumsq_partials`: one warp per block strides over the flat gradient
//    buffer and lane 0 writes the block's sum of squares to
//    partials[blockIdx.x] (the first half of the global gradient norm);
// 2. `pe_optimizer_scalars` (one warp): adds the partials in f64, and forms
//    in f64 what runtime/src/core/training/Optimizer.cpp forms on the host: the step
//    t, the clipping factor, the learning rate of the schedule and the bias
//    corrections 1 - beta^t. It reads and writes the step control block, an
//    array of doubles whose slots are those of runtime/include/stringrt/cuda/
//    StepControl.h (included: one layout; the device optimizer tests compare
//    both sides against Optimizer::step). A step whose
//    loss is not finite is not applied, and the block stays "halted" (no
//    later step applies either) until the host resets it;
// 3. `pe_adamw` or `pe_sgd` over the flat buffers, reading lr, the bias
//    corrections and the clipping factor from the control block, and doing
//    nothing when the step is not applied; then, when the optimizer keeps
//    an EMA of the weights, `pe_ema` over the same buffers.
//
// So the whole step is one CUDA graph with no value passing through the host
// (docs/cuda.md, "The training step").
//
// `pe_adamw` is exactly the formula of Optimizer.cpp (decoupled weight decay,
// bias corrections) evaluated in f32 from the f32-rounded scalars. `pe_sgd`
// is SGD with momentum and decoupled-into-the-gradient weight decay
// (u = momentum u + grad_scale g + wd w, w -= lr u), evaluated in f64 from
// the f32 values and the f64 scalars and rounded once when stored, as the
// CPU does (so the two differ only by the f32 rounding of momentum and wd).
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"
#include "stringc/Dialect/PE/PEOps.h"
#include "OpKernelUtil.h"

#include "stringrt/cuda/StepControl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;

namespace stringc::cudagen {

namespace {

// The slots of the step control block (doubles): the runtime's own layout.
using namespace stringrt::cuda;
using ControlSlot = StepControlSlot;
constexpr double kPi = 3.14159265358979323846; // Optimizer.cpp's

Value control(KernelBuilder &k, Value block, ControlSlot slot) {
  return loadF64(k, block, k.i64(slot));
}

Value lessThan(KernelBuilder &k, Value a, Value b) {
  return cmpF(k, arith::CmpFPredicate::OLT, a, b);
}

/// learningRate() of Optimizer.cpp at step t (f64), from the control block.
Value scheduledLr(KernelBuilder &k, Value block, Value t) {
  Value base = control(k, block, kControlBaseLr), minLr = control(k, block, kControlMinLr);
  Value warmup = control(k, block, kControlWarmupSteps), total = control(k, block, kControlTotalSteps);
  Value one = f64(k, 1.0);
  // Both sides of each choice are computed; the one not chosen may divide by 0.
  Value warming = k.div(k.mul(base, t), warmup);
  Value fraction = k.div(k.sub(t, warmup), k.sub(total, warmup));
  Value progress = select(k, lessThan(k, warmup, total),
                          select(k, lessThan(k, fraction, one), fraction, one), one);
  Value cosine =
      k.add(minLr, k.div(k.mul(k.sub(base, minLr), k.add(one, cosF64(k, k.mul(f64(k, kPi), progress)))),
                         f64(k, 2.0)));
  Value scheduled = select(k, cmpF(k, arith::CmpFPredicate::OLE, t, warmup), warming, cosine);
  Value constant = cmpF(k, arith::CmpFPredicate::OEQ, control(k, block, kControlSchedule), f64(k, 0.0));
  return select(k, constant, base, scheduled);
}

/// Whether the control block says this step updates the parameters.
Value stepApplied(KernelBuilder &k, Value block) {
  return cmpF(k, arith::CmpFPredicate::OGT, control(k, block, kControlApplied), f64(k, 0.0));
}

} // namespace

void appendOptimizerKernels(std::vector<KernelDef> &defs) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64, F = ParamKind::F32;

  GpuKernelSpec scalars;
  scalars.name = "pe_optimizer_scalars";
  scalars.peOp = pe::OptimizerOp::getOperationName();
  scalars.params = {{"control", P}, {"partials", P}, {"blocks", I}, {"loss", P}};
  scalars.grid = GridRule::Explicit; // one block
  scalars.blockX = 32;
  defs.push_back({scalars, [](KernelBuilder &k) {
                    Value block = k.arg(0), partials = k.arg(1), blocks = k.arg(2);
                    Value lane = k.threadId(gpu::Dimension::x);
                    // Lane l adds partials l, l + 32, ... in f64; lane 0 adds the lanes.
                    ValueRange mine = k.forLoop(lane, blocks, k.i64(32), {f64(k, 0.0)},
                                                [&](Value i, ValueRange sum) {
                                                  return SmallVector<Value>{k.add(
                                                      sum[0], f32ToF64(k, k.load(partials, i)))};
                                                });
                    Value lanes = sharedArrayOf(k, "pe_optimizer_lane_sums",
                                                k.builder().getF64Type(), 32);
                    storeF64(k, mine[0], lanes, lane);
                    barrier(k);
                    Value lane0 = cmpI(k, arith::CmpIPredicate::eq, lane, k.i64(0));
                    k.ifThen(lane0, [&] {
                      ValueRange sumSq = k.forLoop(k.i64(0), k.i64(32), k.i64(1), {f64(k, 0.0)},
                                                   [&](Value l, ValueRange sum) {
                                                     return SmallVector<Value>{
                                                         k.add(sum[0], loadF64(k, lanes, l))};
                                                   });
                      auto put = [&](ControlSlot slot, Value value) {
                        storeF64(k, value, block, k.i64(slot));
                      };
                      Value one = f64(k, 1.0), zero = f64(k, 0.0);
                      Value infinity = f64(k, std::numeric_limits<double>::infinity());
                      Value loss = f32ToF64(k, k.load(k.arg(3), k.i64(0)));
                      Value finite = andI(k, lessThan(k, loss, infinity),
                                          lessThan(k, k.sub(zero, infinity), loss));
                      Value running = cmpF(k, arith::CmpFPredicate::OEQ,
                                           control(k, block, kControlHalted), zero);
                      Value apply = andI(k, finite, running);
                      Value taken = control(k, block, kControlStepsTaken);
                      Value t = k.add(taken, one);
                      Value norm = sqrtF64(k, sumSq[0]);
                      Value clip = control(k, block, kControlClipNorm);
                      Value clipping = andI(k, lessThan(k, zero, clip), lessThan(k, clip, norm));
                      put(kControlStep, t);
                      put(kControlLoss, loss);
                      put(kControlGradNorm, norm);
                      put(kControlClipScale, select(k, clipping, k.div(clip, norm), one));
                      put(kControlLr, scheduledLr(k, block, t));
                      put(kControlBiasCorrection1, k.sub(one, powF64(k, control(k, block, kControlBeta1), t)));
                      put(kControlBiasCorrection2, k.sub(one, powF64(k, control(k, block, kControlBeta2), t)));
                      put(kControlApplied, select(k, apply, one, zero));
                      put(kControlStepsTaken, select(k, apply, t, taken));
                      put(kControlHalted, select(k, apply, zero, one));
                    });
                  }});

  // pe_adamw_bf16 also writes the updated parameters, rounded to bf16, into
  // `param_bf16`: the bf16 copy the GEMMs of a bf16 package read
  // (stringrt::kBf16ParamsKernel rewrites it after the other changes).
  for (bool copy : {false, true}) {
    GpuKernelSpec adamw;
    adamw.name = copy ? "pe_adamw_bf16" : "pe_adamw";
    adamw.peOp = pe::OptimizerOp::getOperationName();
    adamw.params = {{"param", P},   {"m", P},     {"v", P},     {"grad", P}, {"n", I},
                    {"control", P}, {"beta1", F}, {"beta2", F}, {"eps", F},  {"weight_decay", F}};
    if (copy)
      adamw.params.push_back({"param_bf16", P});
    defs.push_back({adamw, [copy](KernelBuilder &k) {
                      Value param = k.arg(0), mBuf = k.arg(1), vBuf = k.arg(2), grad = k.arg(3);
                      Value block = k.arg(5);
                      Value b1 = k.arg(6), b2 = k.arg(7), eps = k.arg(8), wd = k.arg(9);
                      k.ifThen(stepApplied(k, block), [&] {
                        Value lr = f64ToF32(k, control(k, block, kControlLr));
                        Value bc1 = f64ToF32(k, control(k, block, kControlBiasCorrection1));
                        Value bc2 = f64ToF32(k, control(k, block, kControlBiasCorrection2));
                        Value scale = f64ToF32(k, control(k, block, kControlClipScale));
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
                          Value next = k.sub(w, k.mul(lr, update));
                          k.store(next, param, i);
                          if (copy)
                            k.store(next, k.arg(10), i); // a bf16 argument: rounded
                        });
                      });
                    }});
    if (copy) {
      defs.back().bf16Args.assign(adamw.params.size(), false);
      defs.back().bf16Args[10] = true;
    }
  }

  GpuKernelSpec sgd;
  sgd.name = "pe_sgd";
  sgd.peOp = pe::OptimizerOp::getOperationName();
  sgd.params = {{"param", P},   {"u", P},        {"grad", P},         {"n", I},
                {"control", P}, {"momentum", F}, {"weight_decay", F}};
  defs.push_back({sgd, [](KernelBuilder &k) {
                    Value param = k.arg(0), uBuf = k.arg(1), grad = k.arg(2), block = k.arg(4);
                    Value mu = f32ToF64(k, k.arg(5)), wd = f32ToF64(k, k.arg(6));
                    k.ifThen(stepApplied(k, block), [&] {
                      Value lr = control(k, block, kControlLr), scale = control(k, block, kControlClipScale);
                      k.forGridStride(k.arg(3), [&](Value i) {
                        Value g = k.mul(scale, f32ToF64(k, k.load(grad, i)));
                        Value w = f32ToF64(k, k.load(param, i));
                        Value u = k.add(k.add(k.mul(mu, f32ToF64(k, k.load(uBuf, i))), g),
                                        k.mul(wd, w));
                        k.store(f64ToF32(k, u), uBuf, i);
                        k.store(f64ToF32(k, k.sub(w, k.mul(lr, u))), param, i);
                      });
                    });
                  }});

  // The EMA of the weights after the update (Optimizer::updateEma): e = w at
  // step 1, else e = d e + (1 - d) w in f64 rounded once, d from the control
  // block (exact, where an f32 argument would round it); nothing when the
  // step is not applied.
  GpuKernelSpec ema;
  ema.name = "pe_ema";
  ema.peOp = pe::OptimizerOp::getOperationName();
  ema.params = {{"ema", P}, {"param", P}, {"n", I}, {"control", P}};
  defs.push_back({ema, [](KernelBuilder &k) {
                    Value eBuf = k.arg(0), param = k.arg(1), block = k.arg(3);
                    k.ifThen(stepApplied(k, block), [&] {
                      Value d = control(k, block, kControlEmaDecay);
                      Value first = cmpF(k, arith::CmpFPredicate::OEQ,
                                         control(k, block, kControlStep), f64(k, 1.0));
                      Value rest = k.sub(f64(k, 1.0), d);
                      k.forGridStride(k.arg(2), [&](Value i) {
                        Value w = k.load(param, i);
                        Value averaged = f64ToF32(
                            k, k.add(k.mul(d, f32ToF64(k, k.load(eBuf, i))),
                                     k.mul(rest, f32ToF64(k, w))));
                        k.store(select(k, first, w, averaged), eBuf, i);
                      });
                    });
                  }});

  GpuKernelSpec sumsq;
  sumsq.name = "pe_sumsq_partials";
  sumsq.peOp = pe::OptimizerOp::getOperationName();
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
