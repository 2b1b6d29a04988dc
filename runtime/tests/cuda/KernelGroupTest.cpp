// Kernel groups (docs/cuda.md, "Kernel groups"; CudaLaunch::groupSize): the
// group the compiler makes of vit_cayley's four Cayley weights in each
// program, its binding, and the loader's refusal of a malformed group. No
// GPU: DeviceTraining.CayleyWeightGroupsGiveTheBitsOfOneLaunchALayer runs
// the group on the emulated device.
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

const char *cayleyPackage() {
  const char *path = std::getenv("STRINGRT_CUDA_CAYLEY_PACKAGE");
  return path && *path && std::filesystem::exists(path) ? path : nullptr;
}

// The kernel groups of a program's steps: (index of the first member, size).
std::vector<std::pair<size_t, int64_t>> kernelGroupsOf(const CudaProgramSteps &steps) {
  std::vector<std::pair<size_t, int64_t>> groups;
  for (size_t s = 0; s < steps.ops.size(); ++s)
    for (const CudaLaunch &l : steps.ops[s].launches)
      if (l.groupSize > 1)
        groups.push_back({s, l.groupSize});
  return groups;
}

// vit_cayley (4 blocks): the Cayley weights of the four layers are one
// group in each program, pe_cayley_weights on 4 blocks with a table of
// (S, W) per layer; the steps bind at several batch sizes.
TEST(KernelGroup, VitCayleyGroupsItsFourCayleyWeights) {
  const char *path = cayleyPackage();
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_CAYLEY_PACKAGE is not set";
  Package package = Package::load(path);
  const CudaSection &section = *package.cuda();
  const Manifest &manifest = package.manifest();
  for (const char *program : {"forward", "gradients"}) {
    const CudaProgramSteps &steps = *section.stepsOf(program);
    auto groups = kernelGroupsOf(steps);
    ASSERT_EQ(groups.size(), 1u) << program;
    auto [first, size] = groups.front();
    EXPECT_EQ(size, 4);
    for (size_t m = first; m < first + 4; ++m)
      EXPECT_EQ(manifest.program(program).ops[size_t(steps.ops[m].op)].op, "pe.cayley_weight");
    const CudaLaunch &launch = steps.ops[first].launches.at(0);
    EXPECT_EQ(section.kernels[size_t(launch.kernel)].name, "pe_cayley_weights");
    ASSERT_EQ(launch.groupArgs.size(), 2u);
    EXPECT_EQ(launch.groupArgs[0].kind, CudaArgKind::Operand);
    EXPECT_EQ(launch.groupArgs[1].kind, CudaArgKind::Result);
    EXPECT_TRUE(steps.ops[first].scratchBytes.empty());
    for (int64_t batch : {1, 3, 128})
      EXPECT_NO_THROW(cuda::checkProgramSteps(manifest, section, program, batch))
          << program << " at batch " << batch;
  }
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
      if (steps.program == "forward") {
        auto groups = kernelGroupsOf(steps);
        EXPECT_EQ(groups.size(), 1u);
        edit(steps, groups.front().first);
      }
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
  // A group argument that is a scratch buffer (shared by every op).
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        steps.ops[first].scratchBytes = {CudaAffine::fixed(4)};
                        steps.ops[first].launches[0].groupArgs[0] = CudaArg::scratch(0);
                      }),
                      {"group.args[0] must be an operand or a result"}));
  // The group's launch without its table, and a table outside a group.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        steps.ops[first].launches[0].args[0] = CudaArg::operand(0);
                      }),
                      {"a kernel group's launch takes its table"}));
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first) {
                        steps.ops[first + 1].launches[0].args[0] = CudaArg::groupTable();
                      }),
                      {"a group_table argument outside a kernel group"}));
}

} // namespace
} // namespace stringrt::test
