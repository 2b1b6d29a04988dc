// The checks across a package's `cuda` section that tie several entries of
// its steps together: grouped GEMMs (one cublasGemmBatchedEx for several
// ops), bias-gradient epilogues (a GEMM and the fallback entry after it) and
// kernel groups (one launch for several ops' first launches). Part of
// CudaSectionParser (CudaSectionParser.h); the rest of the steps are in
// CudaSectionSteps.cpp.
#include "format/CudaSectionParser.h"

#include <algorithm>
#include <optional>

namespace stringrt::detail {
namespace {

// Whether `g` and `h` are one GEMM but for the group (CudaGemm::groupSize):
// shape, transposes, alpha, beta, count, arguments, epilogue and addend.
bool sameGemmButGroup(const CudaGemm &g, const CudaGemm &h) {
  auto same = [](const CudaArg &a, const CudaArg &b) {
    return a.kind == b.kind && a.index == b.index;
  };
  return g.m == h.m && g.n == h.n && g.k == h.k && g.count == h.count && g.transA == h.transA &&
         g.transB == h.transB && g.alpha == h.alpha && g.beta == h.beta && same(g.a, h.a) &&
         same(g.b, h.b) && same(g.c, h.c) && g.epilogue == h.epilogue &&
         g.addend.has_value() == h.addend.has_value() && (!g.addend || same(*g.addend, *h.addend));
}

} // namespace

// Each grouped GEMM (CudaGemm::groupSize) and the members it names: the
// next entries of the steps, only free ops between them in the program,
// each one GEMM launch alone, of the first's shape, arguments and types,
// and independent (no member reads or writes a value an earlier one
// writes): what one cublasGemmBatchedEx computes as the ops would.
void CudaSectionParser::checkGemmGroups(const CudaSection &section) const {
  for (const CudaProgramSteps &steps : section.steps) {
    const Program &program = manifest.program(steps.program);
    for (size_t first = 0; first < steps.ops.size(); ++first) {
      const CudaOpSteps &leader = steps.ops[first];
      const ProgramOp &leaderOp = program.ops[size_t(leader.op)];
      // The grouped later GEMMs of a kernel group of first launches are the
      // kernel group's (checkKernelGroups).
      if (std::any_of(leader.launches.begin(), leader.launches.end(),
                      [](const CudaLaunch &l) { return l.groupSize != 1; }))
        continue;
      int64_t size = 1;
      for (const CudaLaunch &l : leader.launches)
        if (l.gemm && l.gemm->groupSize != 1)
          size = l.gemm->groupSize;
      if (size == 1)
        continue;
      std::string where = fmt::format("cuda.steps.{} op {} ({}): a GEMM group of {}",
                                      steps.program, leader.op, leaderOp.op, size);
      if (first + size_t(size) > steps.ops.size())
        fail(fmt::format("{} runs past the program's steps", where));
      if (leader.launches.size() != 1 || !leader.launches[0].gemm)
        fail(fmt::format("{}: the first op is not one GEMM launch alone", where));
      const CudaGemm &g0 = *leader.launches.front().gemm;
      auto typeOf = [&](const ProgramOp &op, const CudaArg &a) {
        return a.kind == CudaArgKind::Operand ? steps.dtypeOf(op.operands[size_t(a.index)])
                                              : steps.dtypeOf(op.results[size_t(a.index)]);
      };
      std::set<ValueId> written;
      for (size_t i = first; i < first + size_t(size); ++i) {
        const CudaOpSteps &member = steps.ops[i];
        const ProgramOp &op = program.ops[size_t(member.op)];
        std::string at = fmt::format("{}: member op {} ({})", where, member.op, op.op);
        if (member.launches.size() != 1 || !member.launches[0].gemm || !member.scratchBytes.empty())
          fail(fmt::format("{} is not one GEMM launch alone", at));
        const CudaGemm &g = *member.launches[0].gemm;
        if (i > first && g.groupSize != 1)
          fail(fmt::format("{} starts a group of its own", at));
        if (i > first)
          for (int64_t between = steps.ops[i - 1].op + 1; between < member.op; ++between)
            if (!isFreeOp(program.ops[size_t(between)]))
              fail(fmt::format("{}: op {} ({}) between the members is not free", at, between,
                               program.ops[size_t(between)].op));
        if (!(g.count == CudaAffine::fixed(1)) || g.epilogue != CudaGemmEpilogue::None ||
            g.addend)
          fail(fmt::format("{} has count != 1, an epilogue or an addend", at));
        if (!(g.m == g0.m) || !(g.n == g0.n) || !(g.k == g0.k) || g.transA != g0.transA ||
            g.transB != g0.transB || g.alpha != g0.alpha || g.beta != g0.beta)
          fail(fmt::format("{} differs from the first in m, n, k, a transpose, alpha or beta",
                           at));
        if (g.a.kind != CudaArgKind::Operand || g.b.kind != CudaArgKind::Operand ||
            g.c.kind != CudaArgKind::Result)
          fail(fmt::format("{}: A and B must be operands and C a result of the op", at));
        if (typeOf(op, g.a) != typeOf(leaderOp, g0.a) ||
            typeOf(op, g.b) != typeOf(leaderOp, g0.b) ||
            typeOf(op, g.c) != typeOf(leaderOp, g0.c))
          fail(fmt::format("{}: the storage types of A, B or C differ from the first's", at));
        ValueId a = op.operands[size_t(g.a.index)], b = op.operands[size_t(g.b.index)],
                c = op.results[size_t(g.c.index)];
        if (written.count(a) || written.count(b))
          fail(fmt::format("{} reads value {} that an earlier member writes", at,
                           written.count(a) ? a : b));
        if (!written.insert(c).second)
          fail(fmt::format("{} writes value {} that an earlier member writes", at, c));
      }
      first += size_t(size) - 1;
    }
  }
}

// Each GEMM with a bias_grad epilogue (CudaGemmEpilogue::BiasGrad): the
// next entry of the steps (only free ops between) is its fallback, whose op
// has the result the bias names, of C's type; neither is part of a group
// (the runtime skips that entry when the epilogue ran).
void CudaSectionParser::checkBiasGradients(const CudaSection &section) const {
  for (const CudaProgramSteps &steps : section.steps) {
    const Program &program = manifest.program(steps.program);
    for (size_t e = 0; e < steps.ops.size(); ++e)
      for (size_t l = 0; l < steps.ops[e].launches.size(); ++l) {
        const std::optional<CudaGemm> &g = steps.ops[e].launches[l].gemm;
        if (!g || g->epilogue != CudaGemmEpilogue::BiasGrad)
          continue;
        const ProgramOp &op = program.ops[size_t(steps.ops[e].op)];
        std::string where = fmt::format("cuda.steps.{} op {} ({}) launch {}: a bias_grad GEMM",
                                        steps.program, steps.ops[e].op, op.op, l);
        if (e + 1 >= steps.ops.size())
          fail(fmt::format("{} is the program's last entry (no next entry to compute the bias "
                           "gradient of)",
                           where));
        const CudaOpSteps &next = steps.ops[e + 1];
        const ProgramOp &nextOp = program.ops[size_t(next.op)];
        for (int64_t between = steps.ops[e].op + 1; between < next.op; ++between)
          if (!isFreeOp(program.ops[size_t(between)]))
            fail(fmt::format("{}: op {} ({}) between it and the next entry is not free", where,
                             between, program.ops[size_t(between)].op));
        if (size_t(g->bias.index) >= nextOp.results.size())
          fail(fmt::format("{}: bias result {} out of range (op {} ({}) has {})", where,
                           g->bias.index, next.op, nextOp.op, nextOp.results.size()));
        if (next.launches.empty())
          fail(fmt::format("{}: the next entry (op {}) has no launches to fall back to", where,
                           next.op));
        for (const CudaLaunch &nl : next.launches)
          if (nl.groupSize != 1 || (nl.gemm && (nl.gemm->groupSize != 1 ||
                                                nl.gemm->epilogue == CudaGemmEpilogue::BiasGrad)))
            fail(fmt::format("{}: the next entry (op {}) is a group's or has a bias_grad GEMM",
                             where, next.op));
        DType c = g->c.kind == CudaArgKind::Result ? steps.dtypeOf(op.results[size_t(g->c.index)])
                  : g->c.kind == CudaArgKind::Operand
                      ? steps.dtypeOf(op.operands[size_t(g->c.index)])
                      : DType::F32;
        DType bias = steps.dtypeOf(nextOp.results[size_t(g->bias.index)]);
        if (bias != c)
          fail(fmt::format("{}: the bias gradient is {} and C {} (cuBLASLt writes it in C's "
                           "type)",
                           where, dtypeName(bias), dtypeName(c)));
      }
  }
}

// Each kernel group (CudaLaunch::groupSize) and the members it names: the
// leader's first launch (its only one, or a group of first launches whose
// members have as many launches as the leader, the runtime skipping each
// member's first: only there may a group argument be a scratch buffer,
// which the runtime checks the members keep apart, checkGroupScratch), the
// next entries of the steps, only free ops between them in the program,
// each an op of the leader's name, operand and result types (storage types
// included) whose own steps read every constant the group's launch reads,
// none reading or writing a value an earlier member writes: what one
// launch computes as the ops' launches would. In a group of first launches,
// a later launch of the first op may be a GEMM group of the group's size
// (count 1, no epilogue, no addend) when that launch of every member is the
// same GEMM: one cublasGemmBatchedEx computes the members' launch.
void CudaSectionParser::checkKernelGroups(const CudaSection &section) const {
  for (const CudaProgramSteps &steps : section.steps) {
    const Program &program = manifest.program(steps.program);
    for (size_t first = 0; first < steps.ops.size(); ++first) {
      const CudaOpSteps &leader = steps.ops[first];
      const ProgramOp &leaderOp = program.ops[size_t(leader.op)];
      int64_t size = 1;
      for (const CudaLaunch &l : leader.launches)
        if (l.groupSize != 1)
          size = l.groupSize;
      if (size == 1)
        continue;
      std::string where = fmt::format("cuda.steps.{} op {} ({}): a kernel group of {}",
                                      steps.program, leader.op, leaderOp.op, size);
      for (size_t l = 0; l < leader.launches.size(); ++l)
        if ((l == 0) != (leader.launches[l].groupSize != 1))
          fail(fmt::format("{}: the group's launch is not its op's first launch", where));
      bool firstLaunches = leader.launches.size() > 1;
      // A group of first launches' later launches that the first op runs as
      // grouped GEMMs, one over every member's (CudaGemm::groupSize).
      std::vector<size_t> groupedLater;
      for (size_t l = 1; l < leader.launches.size(); ++l) {
        const std::optional<CudaGemm> &g = leader.launches[l].gemm;
        if (!g || g->groupSize == 1)
          continue;
        if (g->groupSize != size)
          fail(fmt::format("{}: launch {} is a GEMM group of {}, not of the group's size", where,
                           l, g->groupSize));
        if (!(g->count == CudaAffine::fixed(1)) || g->epilogue != CudaGemmEpilogue::None ||
            g->addend)
          fail(fmt::format("{}: launch {}, a GEMM group, has count != 1, an epilogue or an addend",
                           where, l));
        groupedLater.push_back(l);
      }
      if (!firstLaunches)
        for (const CudaArg &a : leader.launches[0].groupArgs)
          if (a.kind == CudaArgKind::Scratch)
            fail(fmt::format("{}: a scratch buffer as a group argument of an op's only launch "
                             "(what it writes, no launch reads)",
                             where));
      if (first + size_t(size) > steps.ops.size())
        fail(fmt::format("{} runs past the program's steps", where));
      auto types = [&](const std::vector<ValueId> &values) {
        std::vector<std::pair<DType, std::vector<int64_t>>> out;
        for (ValueId v : values)
          out.push_back({steps.dtypeOf(v), program.values[size_t(v)].shape});
        return out;
      };
      std::set<ValueId> written;
      for (size_t i = first; i < first + size_t(size); ++i) {
        const CudaOpSteps &member = steps.ops[i];
        const ProgramOp &op = program.ops[size_t(member.op)];
        std::string at = fmt::format("{}: member op {} ({})", where, member.op, op.op);
        if (i > first) {
          for (const CudaLaunch &l : member.launches)
            if (l.groupSize != 1 || (l.gemm && l.gemm->groupSize != 1))
              fail(fmt::format("{} starts a group of its own", at));
          for (int64_t between = steps.ops[i - 1].op + 1; between < member.op; ++between)
            if (!isFreeOp(program.ops[size_t(between)]))
              fail(fmt::format("{}: op {} ({}) between the members is not free", at, between,
                               program.ops[size_t(between)].op));
        }
        if (op.op != leaderOp.op || types(op.operands) != types(leaderOp.operands) ||
            types(op.results) != types(leaderOp.results))
          fail(fmt::format("{} differs from the first in its op, operand or result types", at));
        if (firstLaunches && member.launches.size() != leader.launches.size())
          fail(fmt::format("{} has {} launches, the first {} (a group of first launches)", at,
                           member.launches.size(), leader.launches.size()));
        for (size_t l : groupedLater)
          if (i > first &&
              (!member.launches[l].gemm ||
               !sameGemmButGroup(*member.launches[l].gemm, *leader.launches[l].gemm)))
            fail(fmt::format("{}: launch {} is not the GEMM of the first's launch {}, a GEMM group",
                             at, l, l));
        // A constant the group's launch reads (a sparse support) is every
        // member's: each reads it in its own steps too.
        if (i > first)
          for (const CudaArg &a : leader.launches[0].args)
            if (a.kind == CudaArgKind::Constant &&
                std::none_of(member.launches.begin(), member.launches.end(),
                             [&](const CudaLaunch &l) {
                               return std::any_of(l.args.begin(), l.args.end(), [&](const CudaArg &b) {
                                 return b.kind == CudaArgKind::Constant && b.index == a.index;
                               });
                             }))
              fail(fmt::format("{} does not read constant {} that the group's launch reads", at,
                               a.index));
        for (ValueId v : op.operands)
          if (written.count(v))
            fail(fmt::format("{} reads value {} that an earlier member writes", at, v));
        for (ValueId v : op.results)
          if (!written.insert(v).second)
            fail(fmt::format("{} writes value {} that an earlier member writes", at, v));
      }
      first += size_t(size) - 1;
    }
  }
}

} // namespace stringrt::detail
