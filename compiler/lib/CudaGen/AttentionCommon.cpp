//===- AttentionCommon.cpp - what the f32 and MMA attention kernels share -===//
#include "AttentionCommon.h"

#include "stringrt/CudaSection.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;

namespace stringc::cudagen::attention {

using A = LaunchArg;

std::string kernelName(llvm::StringRef family, Kind kind, int64_t dh) {
  std::string name = family.str();
  switch (kind) {
  case Kind::Forward:
    break;
  case Kind::DkDv:
    name += "_grad_dkdv";
    break;
  case Kind::Dq:
    name += "_grad_dq";
    break;
  }
  return name + "_d" + std::to_string(dh);
}

ParamList kernelParams(Kind kind, Enc enc) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64, F = ParamKind::F32;
  ParamList params;
  switch (kind) {
  case Kind::Forward:
    params = {{"y", P}, {"lse", P}};
    break;
  case Kind::DkDv:
    params = {{"dk", P}, {"dv", P}};
    break;
  case Kind::Dq:
    params = {{"dq", P}};
    if (enc == Enc::Rel) // dS_ij for the drel kernel
      params.push_back({"ds", P});
    break;
  }
  params.insert(params.end(), {{"q", P}, {"k", P}, {"v", P}});
  if (enc == Enc::Rope)
    params.push_back({"table", P});
  if (enc == Enc::Rel)
    params.push_back({"rel", P});
  if (kind != Kind::Forward)
    params.insert(params.end(), {{"dy", P}, {"lse", P}, {"delta", P}});
  params.insert(params.end(),
                {{"tokens", I}, {"width", I}, {"heads", I}, {"lookahead", I}, {"scale", F}});
  return params;
}

const char *servedOp(Kind kind, bool rope) {
  if (kind == Kind::Forward)
    return rope ? pe::RopeAttentionOp::getOperationName().data()
                : pe::AttentionOp::getOperationName().data();
  return rope ? pe::RopeAttentionGradOp::getOperationName().data()
              : pe::AttentionGradOp::getOperationName().data();
}

Value NamedArgs::operator()(llvm::StringRef name) const {
  if (Value arg = optional(name))
    return arg;
  llvm::report_fatal_error(llvm::Twine("attention kernel has no parameter ") + name);
}

Value NamedArgs::optional(llvm::StringRef name) const {
  for (unsigned i = 0; i < params.size(); ++i)
    if (params[i].first == name)
      return k.arg(i);
  return Value();
}

Value HeadBlock::at(Value token) const {
  return k.add(k.mul(k.add(k.mul(batch, tokens), token), width), k.mul(head, k.i64(dh)));
}

Value HeadBlock::tableAt(Value token) const {
  return k.add(k.mul(token, width), k.mul(head, k.i64(dh)));
}

Value HeadBlock::clamp(Value token) const {
  return minI(k, token, k.sub(tokens, k.i64(1)));
}

Value HeadBlock::inRange(Value token) const {
  return cmpI(k, arith::CmpIPredicate::slt, token, tokens);
}

HeadBlock makeHeadBlock(KernelBuilder &k, const NamedArgs &args, int64_t dh) {
  HeadBlock g{k, dh, args("tokens"), args("width"), args("heads"), args("lookahead"),
              args("scale"), {}, {}, {}, {}, {}};
  g.bh = k.blockId(gpu::Dimension::x);
  g.batchHeads = k.gridDim(gpu::Dimension::x);
  g.head = remU(k, g.bh, g.heads);
  g.batch = divU(k, g.bh, g.heads);
  g.thread = k.threadId(gpu::Dimension::x);
  return g;
}

KernelDef kindKernel(std::string name, Kind kind, Enc enc, int64_t dh, int64_t threads,
                     int64_t sharedBytes, const KindBodies &bodies) {
  if (sharedBytes > stringrt::kMaxDynamicSharedBytes)
    llvm::report_fatal_error(llvm::Twine("attention kernel ") + name + " needs " +
                             llvm::Twine(sharedBytes) + " bytes of shared memory, more than " +
                             llvm::Twine(stringrt::kMaxDynamicSharedBytes));
  ParamList params = kernelParams(kind, enc);
  GpuKernelSpec spec = makeSpec(std::move(name), servedOp(kind, enc == Enc::Rope), params,
                             GridRule::Explicit, threads);
  if (sharedBytes > kSharedLimitBytes)
    spec.dynamicSharedBytes = sharedBytes;
  return {std::move(spec), [kind, dh, params, bodies](KernelBuilder &k) {
            NamedArgs args{k, params};
            switch (kind) {
            case Kind::Forward:
              bodies.forward(k, args, dh);
              break;
            case Kind::DkDv:
              bodies.dkdv(k, args, dh);
              break;
            case Kind::Dq:
              bodies.dq(k, args, dh);
              break;
            }
          }};
}

KernelDef deltaKernel(std::string name, llvm::StringRef servedOp,
                      Value (*roundDy)(KernelBuilder &k, Value x)) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64;
  ParamList params = {{"delta", P},  {"y", P},     {"dy", P},    {"rows", I},
                      {"tokens", I}, {"width", I}, {"heads", I}};
  return {makeSpec(std::move(name), servedOp, params), [params, roundDy](KernelBuilder &k) {
            NamedArgs args{k, params};
            Value tokens = args("tokens"), width = args("width"), heads = args("heads");
            Value dh = divU(k, width, heads);
            k.forGridStride(args("rows"), [&](Value r) {
              // r = bh * T + i, bh = b * H + h: elements (b, i, h * Dh + d).
              Value bh = divU(k, r, tokens), i = remU(k, r, tokens);
              Value b = divU(k, bh, heads), h = remU(k, bh, heads);
              Value base = k.add(k.mul(k.add(k.mul(b, tokens), i), width), k.mul(h, dh));
              ValueRange sum = k.forLoop(k.i64(0), dh, k.i64(1), {k.f32(0.0)},
                                         [&](Value d, ValueRange acc) {
                                           Value at = k.add(base, d);
                                           Value g = k.load(args("dy"), at);
                                           if (roundDy)
                                             g = roundDy(k, g);
                                           Value y = k.load(args("y"), at);
                                           return SmallVector<Value>{
                                               k.builder().create<LLVM::FMAOp>(
                                                   k.location(), g.getType(), g, y, acc[0])};
                                         });
              k.store(sum[0], args("delta"), r);
            });
          }};
}

std::optional<AttentionShape> attentionShape(Type q, int64_t heads) {
  auto shape = batchShape(q);
  if (!shape || shape->size() != 3 || (*shape)[1] <= 0 || (*shape)[2] <= 0 || heads <= 0 ||
      (*shape)[2] % heads)
    return std::nullopt;
  AttentionShape s;
  s.batch = leadingCount(*shape, 1);
  s.tokens = (*shape)[1];
  s.width = (*shape)[2];
  s.heads = heads;
  s.dh = s.width / heads;
  return s;
}

bool ropeTableFits(const AttentionShape &s, Type table) {
  auto shape = batchShape(table);
  return s.dh % 2 == 0 && shape && *shape == std::vector<int64_t>{s.tokens, s.width / 2, 2};
}

std::vector<LaunchArg> sizeArgs(const AttentionShape &s, pe::MaskKind mask, double scale) {
  int64_t lookahead = mask == pe::MaskKind::Causal ? 0 : s.tokens - 1;
  return {A::i64(s.tokens), A::i64(s.width), A::i64(s.heads), A::i64(lookahead),
          A::f32(float(scale))};
}

ExplicitGrid rowTileGrid(const AttentionShape &s, int64_t rowsPerBlock) {
  ExplicitGrid grid;
  grid.x = s.batch * s.heads;
  grid.y = BatchAffine::fixed(ceilDiv(s.tokens, rowsPerBlock));
  return grid;
}

std::vector<LaunchArg> concat(std::vector<LaunchArg> a, const std::vector<LaunchArg> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Launch relLayoutLaunch(const AttentionShape &s, LaunchArg from, LaunchArg to, bool keyFastest) {
  const int64_t entries = s.dh * s.dh;
  return Launch::kernelCall("pe_rel_layout",
                            {to, from, A::i64(s.tokens * s.tokens * entries), A::i64(s.tokens),
                             A::i64(entries), A::i64(keyFastest ? 1 : 0)});
}

BatchAffine relLayoutBytes(const AttentionShape &s) {
  return BatchAffine::fixed(s.tokens * s.tokens * s.dh * s.dh * 4);
}

LaunchArg forwardLse(Operation &op, const AttentionShape &s, OpSteps &steps) {
  if (op.getNumResults() == 2)
    return A::result(1);
  steps.scratchBytes.push_back(s.batch * (s.heads * s.tokens * 4));
  return A::scratch(steps.scratchBytes.size() - 1);
}

OpSteps gradSteps(Enc enc, const AttentionShape &s, const std::vector<LaunchArg> &sizes,
                  llvm::StringRef deltaKernel, KindLaunch launch) {
  OpSteps steps;
  // Operands q, k, v, [table,] y, lse, dy[, rel].
  const unsigned yAt = enc == Enc::Rope ? 4 : 3, lseAt = yAt + 1, dyAt = yAt + 2;
  // delta per (batch, head, query): B * H * T floats.
  const BatchAffine rows = s.batch * (s.heads * s.tokens);
  steps.scratchBytes.push_back(rows * 4);
  steps.launches.push_back(Launch::kernelCall(
      deltaKernel.str(), {A::scratch(0), A::operand(yAt), A::operand(dyAt), A::i64(rows),
                          A::i64(s.tokens), A::i64(s.width), A::i64(s.heads)}));
  std::vector<LaunchArg> inputs = {A::operand(0), A::operand(1), A::operand(2)};
  if (enc == Enc::Rope)
    inputs.push_back(A::operand(3));
  if (enc == Enc::Rel) {
    // dS per (batch, head, query, key): B * H * T * T floats; rel by query, by key.
    steps.scratchBytes.push_back(s.batch * (s.heads * s.tokens * s.tokens * 4));
    steps.scratchBytes.push_back(relLayoutBytes(s));
    steps.scratchBytes.push_back(relLayoutBytes(s));
    const unsigned relAt = dyAt + 1;
    steps.launches.push_back(relLayoutLaunch(s, A::operand(relAt), A::scratch(2), false));
    steps.launches.push_back(relLayoutLaunch(s, A::operand(relAt), A::scratch(3), true));
    inputs.push_back(A::scratch(2));
  }
  // dy, the forward's lse, delta.
  inputs.insert(inputs.end(), {A::operand(dyAt), A::operand(lseAt), A::scratch(0)});
  std::vector<LaunchArg> keyInputs = inputs; // dK/dV: a thread per key
  if (enc == Enc::Rel)
    keyInputs[3] = A::scratch(3);
  steps.launches.push_back(
      launch(Kind::DkDv, concat(concat({A::result(1), A::result(2)}, keyInputs), sizes)));
  std::vector<LaunchArg> dqFront = {A::result(0)};
  if (enc == Enc::Rel)
    dqFront.push_back(A::scratch(1));
  steps.launches.push_back(launch(Kind::Dq, concat(concat(dqFront, inputs), sizes)));
  return steps;
}

} // namespace stringc::cudagen::attention
