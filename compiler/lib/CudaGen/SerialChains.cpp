//===- SerialChains.cpp - kernels whose time is a dependent sequence ------===//
//
// Kernels whose bytes and FLOPs say little of their time (docs/cuda.md,
// "Launch report"), counted from their structure with the machine's
// latencies (GpuMachineModel):
//
// - pe_cayley_factors (CayleyKernels.cpp): one block of 1024 threads (32
//   warps, 8 a scheduler) per matrix, Gauss-Jordan in place on the d x d
//   matrix without pivoting, each element owned by one thread. Per pivot
//   column c of d: one barrier; the pivot's load from the line buffer and
//   its reciprocal (a shared load and ~4 dependent FMA latencies); then the
//   update of the thread's ceil(d^2 / 1024) elements, ~24 instructions each
//   (three loads, a store, five FP operations, selects and 64-bit index
//   arithmetic: counted from the PTX), issued for the scheduler's 8 warps in
//   turn, or their load-to-store latency where that is longer. No pivot
//   search, no index division in the loop. The fill of I + S and the copy
//   out: one pass each, as the update; two i64 divisions to place the
//   thread. Matrices beyond one block per SM run in further waves.
//   pe_cayley_weights (a kernel group of cayley_weight ops, KernelGroups.h)
//   is the same sweep, a block a member: one chain for the group.
// - pe_generator_exp, pe_generator_exp_grad_blocks (GeneratorKernels.cpp):
//   one block of 256 threads (2 warps a scheduler) per matrix, f64: the
//   degree-13 Pade approximant's six d x d products (d^2 / 256 elements a
//   thread, each a chain of d dependent f64 FMAs and an index division)
//   and one Gauss-Jordan solve with partial pivoting on [d | d]
//   (gaussJordanCycles); the squarings depend on
//   the matrix's norm (data) and are not counted: a lower bound. The
//   gradient works on pairs of blocks: twice the products.
// - the relative attention (pe_rel_attention_*_dNN but drel): each thread
//   reads its own R_ij (Dh x Dh floats) for every key: B H T^2 Dh^2 x 4
//   bytes a kernel, from L2 (R is T^2 Dh^2 x 4 bytes, 2.6 MB at T 50, Dh
//   16) at the L2's bandwidth.
// - the relative attention over batch x head rows (pe_rel_attention_rows_*
//   but drel, RelativeAttentionRows.cpp): its time is instruction issue.
//   Each warp (32 rows, one own token) runs, per other token, the rotation
//   (Dh^2 FMAs and Dh^2 / 4 16-byte shared loads of R, broadcast), its two
//   rows' 16-byte loads (Dh / 2), ~4 Dh FMAs of dots and accumulators and
//   ~12 of softmax and mask: relRowsInstructions. The busiest SM runs
//   ceil(work items / SMs) items of 4 warps and issues at most one
//   instruction a cycle per scheduler (4); each staged tile adds a DRAM
//   latency and two barriers that the block waits for. The staged bytes (R
//   and rows, every tile of every work item) at the L2's bandwidth bound
//   it from below. Counted from the kernels' structure, not yet measured.
//
//===----------------------------------------------------------------------===//
#include "LaunchModel.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace stringc::cudagen {
namespace {

/// Cycles of one Gauss-Jordan solve with partial pivoting on a d x w
/// augmented matrix in shared memory by a block of `threads`: per pivot
/// column c, every thread scans rows c..d-1 for the pivot (a dependent
/// chain of d - c shared loads and compares); five barriers; the swap,
/// factor and normalise phases (one element a thread: a shared load and a
/// store each); the elimination of d x w elements, each with a 64-bit
/// division and remainder (emulated, i64DivideCycles of issue each) and ~12
/// other instructions, issued for the scheduler's warps in turn.
double gaussJordanCycles(double d, double w, double threads, const GpuMachineModel &m) {
  const double warpsPerScheduler = std::max(1.0, threads / 32 / 4);
  const double eliminate = std::ceil(d * w / threads) * warpsPerScheduler *
                           (2 * m.i64DivideCycles + 12);
  const double smallPhases = 3 * (m.sharedLoadCycles + m.fmaCycles);
  double cycles = 0;
  for (double c = 0; c < d; ++c)
    cycles += (d - c) * (m.sharedLoadCycles + 2 * m.fmaCycles) + 5 * m.barrierCycles +
              smallPhases + eliminate;
  return cycles;
}

/// Cycles of pe_cayley_factors on a d x d matrix by a block of `threads`
/// (see the header).
double cayleySweepCycles(double d, double threads, const GpuMachineModel &m) {
  const double warpsPerScheduler = std::max(1.0, threads / 32 / 4);
  const double perThread = std::ceil(d * d / threads);
  const double instructionsPerElement = 24;
  const double pass = std::max(perThread * warpsPerScheduler * instructionsPerElement,
                               perThread * (m.sharedLoadCycles + 3 * m.fmaCycles));
  const double step = m.barrierCycles + m.sharedLoadCycles + 4 * m.fmaCycles + pass;
  return d * step + 2 * pass + 2 * m.i64DivideCycles;
}

/// Warp instructions per (warp, other token) of a rows kernel (see the
/// header): Dh^2 + Dh^2 / 4 + Dh / 2 + 4 Dh + 12.
double relRowsInstructions(double dh) { return 1.25 * dh * dh + 4.5 * dh + 12; }

/// The rows kernels' time (see the header); integers (n, tokens, width,
/// heads, lookahead, batch_heads).
std::optional<ExtraTerm> relRowsTime(llvm::StringRef kernel, const LaunchEstimate &e,
                                     const GpuMachineModel &m) {
  if (e.integers.size() < 6 || e.integers[3] <= 0)
    return std::nullopt;
  const int64_t t = e.integers[1], heads = e.integers[3], lookahead = e.integers[4];
  const int64_t rows = e.integers[5], dh = e.integers[2] / heads;
  const int64_t tile = dh <= 16 ? 4 : 1, groups = (t + 3) / 4;
  const bool keys = kernel.contains("grad_dkdv");
  // Other tokens a warp runs through, over the block's token groups.
  double others = 0;
  for (int64_t g = 0; g < groups; ++g) {
    int64_t begin = keys ? std::max<int64_t>(0, 4 * g - lookahead) : 0;
    int64_t end = keys ? t : std::min(t, 4 * g + 4 + lookahead);
    others += double((end - begin + tile - 1) / tile * tile);
  }
  const double items = double((rows + 31) / 32 * groups);
  const double perSM = std::ceil(items / double(m.sms));
  const double resident = double(std::max<int64_t>(1, e.blocksPerSM));
  const double tiles = others / double(groups) / double(tile);
  const double issue = perSM * 4 * (others / double(groups)) * relRowsInstructions(double(dh)) /
                       std::min(4.0, 4 * std::min(perSM, resident));
  const double staging = std::ceil(perSM / resident) * tiles *
                         (m.memoryLatencySeconds * m.clockHz + 2 * m.barrierCycles);
  const double seconds = (issue + staging) / m.clockHz;
  // R (4 x tile pairs) and 2 row tiles (k, v or q, dy) a staged tile
  const double tileBytes = 4.0 * double(4 * tile * dh * dh) + 2.0 * double(tile * 32 * dh * 4);
  const double l2 = items * tiles * tileBytes / m.l2BytesPerSecond;
  char text[160];
  std::snprintf(text, sizeof text,
                "chain: issue of %.0f work items, %.0f tokens a warp x %.0f instructions, %.1f MB staged",
                items, others / double(groups), relRowsInstructions(double(dh)),
                items * tiles * tileBytes / 1e6);
  return ExtraTerm{std::max(seconds, l2), text};
}

/// Waves of `blocks` at `perSM` resident blocks.
double waves(int64_t blocks, int64_t perSM, const GpuMachineModel &m) {
  return std::ceil(double(std::max<int64_t>(1, blocks)) /
                   double(m.sms * std::max<int64_t>(1, perSM)));
}

} // namespace

std::optional<ExtraTerm> serialChain(Operation &op, const LaunchEstimate &e,
                                     const GpuMachineModel &m) {
  llvm::StringRef kernel = e.kernel;
  char text[160];
  if ((kernel == "pe_cayley_factors" || kernel == "pe_cayley_weights") && !e.integers.empty()) {
    double d = double(e.integers[0]);
    double cycles = cayleySweepCycles(d, double(e.threadsPerBlock), m);
    double w = waves(e.blocks, e.blocksPerSM, m);
    std::snprintf(text, sizeof text, "chain: Gauss-Jordan d %.0f, one barrier a pivot, %.0f kcycles x %.0f waves",
                  d, cycles / 1e3, w);
    return ExtraTerm{w * cycles / m.clockHz, text};
  }
  if ((kernel == "pe_generator_exp" || kernel == "pe_generator_exp_grad_blocks") &&
      e.integers.size() >= 3) {
    // (matrices, count, dim); the gradient's matrices are pairs of blocks.
    double d = double(e.integers[2]), matrices = double(e.integers[0]);
    double threads = double(e.threadsPerBlock);
    double products = kernel == "pe_generator_exp" ? 6 : 12;
    double product = std::ceil(d * d / threads) *
                     (d * m.f64FmaCycles + 2 * m.i64DivideCycles) + m.barrierCycles;
    double cycles = products * product + gaussJordanCycles(d, 2 * d, threads, m);
    // blocks loop over the matrices
    double perBlock = std::ceil(matrices / double(std::max<int64_t>(1, e.blocks)));
    double w = waves(e.blocks, e.blocksPerSM, m);
    std::snprintf(text, sizeof text,
                  "chain: f64 Pade-13 d %.0f, %.0f kcycles a matrix x %.0f a block x %.0f waves",
                  d, cycles / 1e3, perBlock, w);
    return ExtraTerm{w * perBlock * cycles / m.clockHz, text};
  }
  if (kernel.starts_with("pe_rel_attention_rows") && !kernel.contains("drel"))
    return relRowsTime(kernel, e, m);
  if (kernel.starts_with("pe_rel_attention") && !kernel.contains("drel")) {
    // q, k, v [B, T, H Dh] and rel [T, T, Dh, Dh]: the first rank-4 operand.
    for (Value operand : op.getOperands()) {
      auto rel = dyn_cast<RankedTensorType>(operand.getType());
      if (!rel || rel.getRank() != 4 || !rel.hasStaticShape())
        continue;
      double t = double(rel.getDimSize(0)), dh = double(rel.getDimSize(2));
      // threads cover B H T rows (one per query or key), each reading T
      // tables of Dh^2 floats
      auto q = dyn_cast<RankedTensorType>(op.getOperand(0).getType());
      if (!q || q.getRank() != 3)
        return std::nullopt;
      double rows = double(e.blocks) / std::ceil(t / double(e.threadsPerBlock)) * t;
      double bytes = rows * t * dh * dh * 4;
      std::snprintf(text, sizeof text, "chain: R_ij re-read from L2, %.2f GB", bytes / 1e9);
      return ExtraTerm{bytes / m.l2BytesPerSecond, text};
    }
  }
  return std::nullopt;
}

} // namespace stringc::cudagen
