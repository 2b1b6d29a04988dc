// Executor adapters of the pe positional-encoding ops (constant tables,
// rotary embeddings, skew / Cayley, generators, rotations, gates): each reads
// the op's attributes and calls its reference kernel (PositionKernels.h).
#include "execution/Executor.h"

#include "stringrt/reference/PositionKernels.h"

namespace stringrt::detail {

void checkRopeMode(const OpContext &c) {
  const std::string &mode = c.op().getString("mode");
  int64_t axes = mode == "seq" ? 1 : (mode == "axial" || mode == "mixed") ? 2 : 0;
  if (axes == 0)
    c.fail("unknown mode '" + mode + "' (seq, axial or mixed)");
  ref::TensorRef<const float> pos = c.in(1);
  if (pos.rank() != 2 || pos.dim(1) != axes)
    c.fail("mode " + mode + " needs positions [T, " + std::to_string(axes) + "], got " +
           ref::shapeToString(pos.shape));
}

namespace {

using namespace stringrt::ref;

void runSeqPositions(const OpContext &c) {
  seqPositions<float>(c.op().getInt("length"), c.intOr("special", 0), c.out(0));
}

void runGridPositions(const OpContext &c) {
  gridPositions<float>(c.op().getInt("rows"), c.op().getInt("cols"), c.intOr("special", 0),
                       c.out(0));
}

void runRopeFreqs(const OpContext &c) {
  const std::string &kind = c.op().getString("kind");
  FreqsKind k = FreqsKind::Seq;
  if (kind == "axial")
    k = FreqsKind::Axial;
  else if (kind != "seq")
    c.fail("unknown kind '" + kind + "' (seq or axial)");
  ropeFreqs<float>(k, c.op().getInt("dim"), c.op().getInt("heads"), c.op().getFloat("base"),
                   c.out(0));
}

void runSinusoidal(const OpContext &c) {
  sinusoidal<float>(c.op().getInt("length"), c.op().getInt("dim"), c.op().getFloat("base"),
                    c.out(0));
}

void runRelativePositions(const OpContext &c) { relativePositions<float>(c.in(0), c.out(0)); }

void runRope(const OpContext &c) {
  checkRopeMode(c);
  rope<float>(c.in(0), c.in(1), c.in(2), c.out(0));
}

void runHouseholder(const OpContext &c) {
  householder<float>(c.in(0), c.in(1), c.in(2), c.in(3), c.out(0));
}

void runSkew(const OpContext &c) { skew<float>(c.in(0), c.op().getInt("dim"), c.out(0)); }

void runSparseSkew(const OpContext &c) {
  sparseSkew<float>(c.in(0), c.op().getInt("dim"), c.op().getInts("support"), c.out(0));
}

void runCayley(const OpContext &c) { cayley<float>(c.in(0), c.in(1), c.out(0)); }

void runGeneratorExp(const OpContext &c) { generatorExp<float>(c.in(0), c.in(1), c.out(0)); }

void runApplyRotation(const OpContext &c) {
  applyRotation<float>(c.in(0), c.in(1), c.op().getInt("heads"), c.out(0));
}

void runCommutatorNorm(const OpContext &c) { commutatorNorm<float>(c.in(0), c.out(0)); }

void runSpdGate(const OpContext &c) { spdGate<float>(c.in(0), c.in(1), c.out(0)); }

} // namespace

void addPositionOps(OpTable &table) {
  table[OpCode::SeqPositions] = {runSeqPositions};
  table[OpCode::GridPositions] = {runGridPositions};
  table[OpCode::RopeFreqs] = {runRopeFreqs};
  table[OpCode::Sinusoidal] = {runSinusoidal};
  table[OpCode::RelativePositions] = {runRelativePositions};
  table[OpCode::Rope] = {runRope};
  table[OpCode::Householder] = {runHouseholder};
  table[OpCode::Skew] = {runSkew};
  table[OpCode::SparseSkew] = {runSparseSkew};
  table[OpCode::Cayley] = {runCayley};
  table[OpCode::GeneratorExp] = {runGeneratorExp};
  table[OpCode::ApplyRotation] = {runApplyRotation};
  table[OpCode::CommutatorNorm] = {runCommutatorNorm};
  table[OpCode::SpdGate] = {runSpdGate};
}

} // namespace stringrt::detail
