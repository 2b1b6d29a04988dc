// Kernel groups (docs/cuda.md, "Kernel groups"; CudaLaunch::groupSize): the
// groups the compiler makes of vit_cayley's four skew builders, Cayley
// weights and skew gradients (and vit_sparse_cayley's sparse ones), their
// binding, and the loader's refusal of a malformed group. No GPU:
// DeviceTraining.CayleyWeightGroupsGiveTheBitsOfOneLaunchALayer and
// SparseSkewGroupsGiveTheBitsOfOneLaunchALayer run the groups on the
// emulated device.
#include "TestFiles.h"

#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/cuda/StepBinding.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>

namespace stringrt::test {
namespace {

const char *packageIn(const char *variable) {
  const char *path = std::getenv(variable);
  return path && *path && std::filesystem::exists(path) ? path : nullptr;
}

const char *cayleyPackage() { return packageIn("STRINGRT_CUDA_CAYLEY_PACKAGE"); }

// The kernel groups of a program's steps: (index of the first member, size).
std::vector<std::pair<size_t, int64_t>> kernelGroupsOf(const CudaProgramSteps &steps) {
  std::vector<std::pair<size_t, int64_t>> groups;
  for (size_t s = 0; s < steps.ops.size(); ++s)
    for (const CudaLaunch &l : steps.ops[s].launches)
      if (l.groupSize > 1)
        groups.push_back({s, l.groupSize});
  return groups;
}

// The first member of the program's kernel group of `kernel`.
size_t groupOf(const CudaSection &section, const CudaProgramSteps &steps, const char *kernel) {
  for (auto [first, size] : kernelGroupsOf(steps))
    if (section.kernels[size_t(steps.ops[first].launches[0].kernel)].name == kernel)
      return first;
  ADD_FAILURE() << "no group of " << kernel << " in " << steps.program;
  return 0;
}

// One group the compiler makes: its kernel, its members' op, and the kinds
// of its group arguments; `launches` each member's (more than 1: a group
// of first launches).
struct ExpectedGroup {
  const char *kernel, *op;
  std::vector<CudaArgKind> args;
  size_t launches = 1;
};

// The groups of `program` in `path`'s package are `expected` (in step
// order), each of four members of its op: a group of whole ops without
// scratch; a group of first launches with each member's scratch 0 the
// padding that puts its buffers past the member's before it (0 bytes for
// the first, then the layout's bytes of the one before). The steps bind at
// several batch sizes.
void expectGroups(const char *path, const char *program,
                  const std::vector<ExpectedGroup> &expected) {
  Package package = Package::load(path);
  const CudaSection &section = *package.cuda();
  const Manifest &manifest = package.manifest();
  const CudaProgramSteps &steps = *section.stepsOf(program);
  auto groups = kernelGroupsOf(steps);
  ASSERT_EQ(groups.size(), expected.size()) << program;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto [first, size] = groups[g];
    const ExpectedGroup &want = expected[g];
    EXPECT_EQ(size, 4) << want.kernel;
    for (size_t m = first; m < first + size_t(size); ++m)
      EXPECT_EQ(manifest.program(program).ops[size_t(steps.ops[m].op)].op, want.op);
    const CudaLaunch &launch = steps.ops[first].launches.at(0);
    EXPECT_EQ(section.kernels[size_t(launch.kernel)].name, want.kernel);
    std::vector<CudaArgKind> kinds;
    for (const CudaArg &a : launch.groupArgs)
      kinds.push_back(a.kind);
    EXPECT_EQ(kinds, want.args) << want.kernel;
    if (want.launches == 1) {
      EXPECT_TRUE(steps.ops[first].scratchBytes.empty()) << want.kernel;
      continue;
    }
    uint64_t before = 0;
    for (size_t m = first; m < first + size_t(size); ++m) {
      const CudaOpSteps &member = steps.ops[m];
      EXPECT_EQ(member.launches.size(), want.launches) << want.kernel;
      ASSERT_FALSE(member.scratchBytes.empty());
      EXPECT_EQ(member.scratchBytes[0], CudaAffine::fixed(int64_t(before))) << want.kernel;
      before = cuda::scratchLayout(member, 1).bytes;
    }
  }
  for (int64_t batch : {1, 3, 128})
    EXPECT_NO_THROW(cuda::checkProgramSteps(manifest, section, program, batch))
        << program << " at batch " << batch;
}

// The first launches of the four Cayley weight gradients: M (scratch) from
// W (operand 2), each member's two GEMMs then at its own place.
const ExpectedGroup inverses{"pe_cayley_inverses_of_weight",
                             "pe.cayley_weight_grad",
                             {CudaArgKind::Scratch, CudaArgKind::Operand},
                             3};

// vit_cayley (4 blocks): the skew builders, the Cayley weights and (in the
// backward) the Cayley weight gradients' first launches and the skew
// gradients of the four layers are a group each: pe_skews and
// pe_skew_grads with a table of (result, operand) per layer,
// pe_cayley_weights on 4 blocks with a table of (S, W) per layer,
// pe_cayley_inverses_of_weight with a table of (M, W).
TEST(KernelGroup, VitCayleyGroupsItsFourLayersSkewsAndCayleyWeights) {
  const char *path = cayleyPackage();
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_CAYLEY_PACKAGE is not set";
  using K = CudaArgKind;
  ExpectedGroup skews{"pe_skews", "pe.skew", {K::Result, K::Operand}};
  ExpectedGroup weights{"pe_cayley_weights", "pe.cayley_weight", {K::Operand, K::Result}};
  ExpectedGroup grads{"pe_skew_grads", "pe.skew_grad", {K::Result, K::Operand}};
  expectGroups(path, "forward", {skews, weights});
  expectGroups(path, "gradients", {skews, weights, inverses, grads});
}

// vit_sparse_cayley: the same with the sparse skew builders and their
// gradients, the support a constant of the group's launch.
TEST(KernelGroup, VitSparseCayleyGroupsItsSparseSkews) {
  const char *path = packageIn("STRINGRT_CUDA_SPARSE_CAYLEY_PACKAGE");
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_SPARSE_CAYLEY_PACKAGE is not set";
  using K = CudaArgKind;
  ExpectedGroup skews{"pe_sparse_skews", "pe.sparse_skew", {K::Result, K::Operand}};
  ExpectedGroup weights{"pe_cayley_weights", "pe.cayley_weight", {K::Operand, K::Result}};
  ExpectedGroup grads{"pe_sparse_skew_grads", "pe.sparse_skew_grad", {K::Result, K::Operand}};
  expectGroups(path, "forward", {skews, weights});
  expectGroups(path, "gradients", {skews, weights, inverses, grads});
  Package package = Package::load(path);
  const CudaSection &section = *package.cuda();
  const CudaProgramSteps &steps = *section.stepsOf("forward");
  const CudaLaunch &launch = steps.ops[groupOf(section, steps, "pe_sparse_skews")].launches[0];
  ASSERT_GE(launch.args.size(), 2u);
  EXPECT_EQ(launch.args[1].kind, CudaArgKind::Constant);
}

// A member's table row: its group arguments' addresses, in order; an
// argument without an address is refused, naming the member.
TEST(KernelGroup, TableRowsAreTheMembersAddresses) {
  CudaLaunch leader;
  leader.groupSize = 2;
  leader.groupArgs = {CudaArg::operand(0), CudaArg::result(0)};
  cuda::OpPointers member;
  member.operands = {0x1000};
  member.results = {0x2000};
  EXPECT_EQ(cuda::groupTableRow(leader, member, "forward op 7 (pe.cayley_weight)"),
            (std::vector<uint64_t>{0x1000, 0x2000}));
  member.results = {0};
  EXPECT_TRUE(failsWith(
      [&] { cuda::groupTableRow(leader, member, "forward op 7 (pe.cayley_weight)"); }, "",
      {"forward op 7 (pe.cayley_weight) (group argument 1)", "has no device address"}));
}

// The loader refuses a group that names an op it cannot hold, with the
// program, op and reason.
TEST(KernelGroup, TheLoaderRefusesMalformedGroups) {
  const char *path = cayleyPackage();
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_CAYLEY_PACKAGE is not set";
  Package package = Package::load(path);
  auto rewritten = [&](const std::function<void(CudaProgramSteps &, size_t)> &edit) {
    PackageContents contents;
    contents.target = kCudaTarget;
    contents.manifest = package.manifest();
    contents.cuda = *package.cuda();
    for (CudaProgramSteps &steps : contents.cuda->steps)
      if (steps.program == "forward")
        edit(steps, groupOf(*contents.cuda, steps, "pe_cayley_weights"));
    return contents;
  };
  TempDir dir;
  auto refused = [&](const PackageContents &contents, std::vector<std::string> fragments) {
    std::string file = dir.file("bad.pkg");
    writePackage(file, contents);
    return failsWith([&] { Package::load(file); }, file, fragments);
  };
  // One member more: the op after the group (the first of the Q, K and V
  // projections, a GEMM group) is taken in.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        steps.ops[first].launches[0].groupSize = 5;
                      }),
                      {"cuda.steps.forward op", "(pe.cayley_weight): a kernel group of 5: member op",
                       "(pe.linear) starts a group of its own"}));
  // A member that starts a group of its own.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        CudaLaunch &l = steps.ops[first + 1].launches[0];
                        l.groupSize = 2;
                        l.groupArgs = {CudaArg::operand(0)};
                        l.args[0] = CudaArg::groupTable();
                      }),
                      {"starts a group of its own"}));
  // A group argument that is a scratch buffer of an op's only launch
  // (written, never read), or an integer.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        steps.ops[first].scratchBytes = {CudaAffine::fixed(4)};
                        steps.ops[first].launches[0].groupArgs[0] = CudaArg::scratch(0);
                      }),
                      {"a scratch buffer as a group argument of an op's only launch"}));
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        steps.ops[first].launches[0].groupArgs[0] = CudaArg::i64(3);
                      }),
                      {"group.args[0] must be an operand, a result or a scratch buffer"}));
  // The group's launch without its table, and a table outside a group.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        steps.ops[first].launches[0].args[0] = CudaArg::operand(0);
                      }),
                      {"a kernel group's launch takes its table"}));
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        steps.ops[first + 1].launches[0].args[0] = CudaArg::groupTable();
                      }),
                      {"a group_table argument outside a kernel group"}));
  // A member of the skew builders' group is an op of another kind: the
  // run of four taken one further, into the first Cayley weight.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        steps.ops[first - 4].launches[0].groupSize = 5;
                      }),
                      {"(pe.skew): a kernel group of 5: member op", "(pe.cayley_weight)"}));
}

// A member of a sparse skew group whose own steps read another support
// than the group's launch is refused: one launch would build it with the
// first's.
TEST(KernelGroup, TheLoaderRefusesASparseMemberOfAnotherSupport) {
  const char *path = packageIn("STRINGRT_CUDA_SPARSE_CAYLEY_PACKAGE");
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_SPARSE_CAYLEY_PACKAGE is not set";
  Package package = Package::load(path);
  PackageContents contents;
  contents.target = kCudaTarget;
  contents.manifest = package.manifest();
  contents.cuda = *package.cuda();
  ASSERT_GE(contents.cuda->constants.size(), 2u);
  for (CudaProgramSteps &steps : contents.cuda->steps)
    if (steps.program == "forward") {
      size_t first = groupOf(*contents.cuda, steps, "pe_sparse_skews");
      CudaArg &support = steps.ops[first + 2].launches.at(0).args.at(2);
      ASSERT_EQ(support.kind, CudaArgKind::Constant);
      support.index = (support.index + 1) % int64_t(contents.cuda->constants.size());
    }
  TempDir dir;
  std::string file = dir.file("bad.pkg");
  writePackage(file, contents);
  EXPECT_TRUE(failsWith([&] { Package::load(file); }, file,
                        {"cuda.steps.forward op", "(pe.sparse_skew): a kernel group of 4: member op",
                         "does not read constant"}));
}

// A group of first launches (vit_cayley's Cayley weight gradients): the
// loader refuses a member with another number of launches than the first
// (its first would be skipped for a launch it does not have the like of),
// a group flag on a later launch, and malformed GEMM groups of later
// launches.
TEST(KernelGroup, TheLoaderRefusesMalformedGroupsOfFirstLaunches) {
  const char *path = cayleyPackage();
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_CAYLEY_PACKAGE is not set";
  Package package = Package::load(path);
  auto refused = [&](const std::function<void(CudaProgramSteps &, size_t)> &edit,
                     std::vector<std::string> fragments) {
    PackageContents contents;
    contents.target = kCudaTarget;
    contents.manifest = package.manifest();
    contents.cuda = *package.cuda();
    for (CudaProgramSteps &steps : contents.cuda->steps)
      if (steps.program == "gradients")
        edit(steps, groupOf(*contents.cuda, steps, "pe_cayley_inverses_of_weight"));
    TempDir dir;
    std::string file = dir.file("bad.pkg");
    writePackage(file, contents);
    return failsWith([&] { Package::load(file); }, file, fragments);
  };
  EXPECT_TRUE(refused([](CudaProgramSteps &steps,
                         size_t first) { steps.ops[first + 2].launches.pop_back(); },
                      {"cuda.steps.gradients op",
                       "(pe.cayley_weight_grad): a kernel group of 4: member op",
                       "has 2 launches, the first 3 (a group of first launches)"}));
  EXPECT_TRUE(refused(
      [](CudaProgramSteps &steps, size_t first) {
        std::swap(steps.ops[first].launches[0], steps.ops[first].launches[1]);
      },
      {"(pe.cayley_weight_grad): a kernel group of 4: the group's launch is not its op's first "
       "launch"}));
  // The first member's later GEMMs are grouped over the members' (one
  // cublasGemmBatchedEx each): refused when a member's GEMM there is not
  // the first's (it would be computed as the first's), when the GEMM group
  // is not of the kernel group's size, and when it has an epilogue.
  EXPECT_TRUE(refused(
      [](CudaProgramSteps &steps, size_t first) {
        ASSERT_TRUE(steps.ops[first].launches[1].gemm);
        EXPECT_EQ(steps.ops[first].launches[1].gemm->groupSize, 4);
        EXPECT_EQ(steps.ops[first].launches[2].gemm->groupSize, 4);
        steps.ops[first + 3].launches[2].gemm->alpha = 1.0f;
      },
      {"(pe.cayley_weight_grad): a kernel group of 4: member op",
       "launch 2 is not the GEMM of the first's launch 2, a GEMM group"}));
  EXPECT_TRUE(refused([](CudaProgramSteps &steps,
                         size_t first) { steps.ops[first].launches[1].gemm->groupSize = 3; },
                      {"a kernel group of 4: launch 1 is a GEMM group of 3, not of the group's "
                       "size"}));
  EXPECT_TRUE(refused(
      [](CudaProgramSteps &steps, size_t first) {
        steps.ops[first].launches[2].gemm->epilogue = CudaGemmEpilogue::Bias;
        steps.ops[first].launches[2].gemm->bias = CudaArg::operand(0);
      },
      {"launch 2, a GEMM group, has count != 1, an epilogue or an addend"}));
  // A grouped GEMM on a later launch outside a group of first launches.
  EXPECT_TRUE(refused(
      [](CudaProgramSteps &steps, size_t first) {
        steps.ops[first].launches[0] = steps.ops[first + 1].launches[0];
      },
      {"(pe.cayley_weight_grad): a GEMM group of 4: the first op is not one GEMM launch alone"}));
}

// The members of a group of first launches keep their scratch apart (the
// group's launch writes every member's M before their GEMMs read it): the
// compiler's padding passes; without it (every member's layout from 0 of
// the scratch memory) the binding is refused, naming the members. A buffer
// no launch names (the padding) may meet others.
TEST(KernelGroup, MembersOfAGroupOfFirstLaunchesKeepTheirScratchApart) {
  CudaOpSteps a, b;
  for (CudaOpSteps *steps : {&a, &b}) {
    steps->scratchBytes = {CudaAffine::fixed(0), CudaAffine::fixed(1000)};
    CudaLaunch l;
    l.args = {CudaArg::scratch(1)};
    steps->launches = {l, l};
  }
  b.scratchBytes[0] = CudaAffine::fixed(1024); // a's layout: [0, 1024)
  EXPECT_NO_THROW(cuda::checkGroupScratch({&a, &b}, 1, {"gradients op 5", "gradients op 9"}));
  b.scratchBytes[0] = CudaAffine::fixed(768);
  EXPECT_TRUE(failsWith(
      [&] { cuda::checkGroupScratch({&a, &b}, 1, {"gradients op 5", "gradients op 9"}); }, "",
      {"gradients op 9: its scratch bytes [768, 1768) meet [0, 1000) of gradients op 5",
       "a member of the same kernel group"}));

  const char *path = cayleyPackage();
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_CAYLEY_PACKAGE is not set";
  Package package = Package::load(path);
  CudaSection section = *package.cuda();
  for (CudaProgramSteps &steps : section.steps)
    if (steps.program == "gradients") {
      size_t first = groupOf(section, steps, "pe_cayley_inverses_of_weight");
      steps.ops[first + 1].scratchBytes[0] = CudaAffine::fixed(0);
    }
  EXPECT_TRUE(failsWith(
      [&] { cuda::checkProgramSteps(package.manifest(), section, "gradients", 2); }, "",
      {"(pe.cayley_weight_grad): its scratch bytes", "(pe.cayley_weight_grad), a member of the "
                                                     "same kernel group"}));
}

} // namespace
} // namespace stringrt::test
