// Grouped GEMMs (docs/cuda.md, "Grouped GEMMs"; CudaGemm::groupSize): the
// groups the compiler marks in vit_rope's package, the loader's refusal of
// a malformed group, and the binding check that refuses a group whose
// members' matrices overlap (what one cublasGemmBatchedEx would race on).
// No GPU: the emulated gradient CTests run the groups.
#include "TestFiles.h"

#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/cuda/StepBinding.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace stringrt::test {
namespace {

using cuda::BoundGemm;

BoundGemm gemmAt(uint64_t a, uint64_t b, uint64_t c) {
  BoundGemm g;
  g.a = a;
  g.b = b;
  g.c = c;
  g.m = 8;
  g.n = 4;
  g.k = 2;
  return g;
}

// Two members, each A 8 x 2, B 2 x 4, C 8 x 4 floats (64, 32, 128 bytes).
TEST(GemmGroup, MembersWhoseCOverlapsAnotherMatrixAreRefused) {
  const std::vector<std::string> names = {"gradients op 3 (pe.linear_grad_weight)",
                                          "gradients op 4 (pe.linear_grad_weight)"};
  // Apart: accepted (the same A and B read by both is fine).
  EXPECT_NO_THROW(cuda::checkGemmGroup({gemmAt(0x1000, 0x2000, 0x3000),
                                        gemmAt(0x1000, 0x2100, 0x3100)},
                                       names));
  // The second's C over the first's A or B: refused, naming it.
  for (uint64_t c : {0x1000u + 32u, 0x2000u + 16u})
    EXPECT_TRUE(failsWith(
        [&] {
          cuda::checkGemmGroup({gemmAt(0x1000, 0x2000, 0x3000), gemmAt(0x1000, 0x2100, c)},
                               names);
        },
        "", {"gradients op 4 (pe.linear_grad_weight): its GEMM's C overlaps the", "of gradients op 3"}));
  // Two Cs overlapping by one float: refused, naming the first.
  EXPECT_TRUE(failsWith(
      [&] {
        cuda::checkGemmGroup({gemmAt(0x1000, 0x2000, 0x3000), gemmAt(0x1000, 0x2100, 0x3000 + 124)},
                             names);
      },
      "", {"gradients op 3 (pe.linear_grad_weight): its GEMM's C overlaps the C of gradients op 4",
           "one cublasGemmBatchedEx would race on it"}));
  // The first's C over the second's B: refused, naming the first.
  EXPECT_TRUE(failsWith(
      [&] {
        cuda::checkGemmGroup({gemmAt(0x1000, 0x2000, 0x2100), gemmAt(0x1000, 0x2100, 0x3100)},
                             names);
      },
      "", {"gradients op 3 (pe.linear_grad_weight): its GEMM's C overlaps the B of gradients op 4"}));
  // Adjacent, not overlapping: accepted.
  EXPECT_NO_THROW(cuda::checkGemmGroup({gemmAt(0x1000, 0x2000, 0x3000),
                                        gemmAt(0x1000, 0x2000, 0x3000 + 128)},
                                       names));
  // A member of another shape is refused.
  BoundGemm other = gemmAt(0x1000, 0x2100, 0x3100);
  other.k = 3;
  EXPECT_TRUE(failsWith(
      [&] { cuda::checkGemmGroup({gemmAt(0x1000, 0x2000, 0x3000), other}, names); }, "",
      {"gradients op 4 (pe.linear_grad_weight): a member of the GEMM group"}));
}

const char *vitPackage() {
  const char *path = std::getenv("STRINGRT_CUDA_VIT_PACKAGE");
  return path && *path && std::filesystem::exists(path) ? path : nullptr;
}

// The groups of a program's steps: (index of the first member, size).
std::vector<std::pair<size_t, int64_t>> groupsOf(const CudaProgramSteps &steps) {
  std::vector<std::pair<size_t, int64_t>> groups;
  for (size_t s = 0; s < steps.ops.size(); ++s)
    for (const CudaLaunch &l : steps.ops[s].launches)
      if (l.gemm && l.gemm->groupSize > 1)
        groups.push_back({s, l.gemm->groupSize});
  return groups;
}

// vit_rope (4 blocks): each block's Q, K and V projections are one group of
// three in both programs, and in @gradients each block's weight gradients of
// Q, K and V another (pe-cluster-gemms puts them together); every group
// binds at several batch sizes.
TEST(GemmGroup, VitRopeGroupsItsProjectionsAndTheirWeightGradients) {
  const char *path = vitPackage();
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_VIT_PACKAGE is not set";
  Package package = Package::load(path);
  const CudaSection &section = *package.cuda();
  const Manifest &manifest = package.manifest();
  auto countOf = [&](const char *program, const char *op) {
    int64_t groups = 0;
    const CudaProgramSteps &steps = *section.stepsOf(program);
    for (const auto &[first, size] : groupsOf(steps))
      if (size == 3 && manifest.program(program).ops[size_t(steps.ops[first].op)].op == op)
        ++groups;
    return groups;
  };
  EXPECT_EQ(countOf("forward", "pe.linear"), 4);
  EXPECT_EQ(countOf("gradients", "pe.linear"), 4);
  EXPECT_EQ(countOf("gradients", "pe.linear_grad_weight"), 4);
  for (const char *program : {"forward", "gradients"})
    for (int64_t batch : {1, 3, 128})
      EXPECT_NO_THROW(cuda::checkProgramSteps(manifest, section, program, batch))
          << program << " at batch " << batch;
}

// The loader refuses a group that names an op it cannot hold, with the
// program, op and reason.
TEST(GemmGroup, TheLoaderRefusesMalformedGroups) {
  const char *path = vitPackage();
  if (!path)
    GTEST_SKIP() << "STRINGRT_CUDA_VIT_PACKAGE is not set";
  Package package = Package::load(path);
  auto rewritten = [&](const std::function<void(CudaProgramSteps &, size_t, int64_t)> &edit) {
    PackageContents contents;
    contents.target = kCudaTarget;
    contents.manifest = package.manifest();
    contents.cuda = *package.cuda();
    for (CudaProgramSteps &steps : contents.cuda->steps)
      if (steps.program == "forward") {
        auto groups = groupsOf(steps);
        EXPECT_FALSE(groups.empty());
        edit(steps, groups.front().first, groups.front().second);
      }
    return contents;
  };
  TempDir dir;
  auto refused = [&](const PackageContents &contents, std::vector<std::string> fragments) {
    std::string file = dir.file("bad.pkg");
    writePackage(file, contents);
    return failsWith([&] { Package::load(file); }, file, fragments);
  };
  // One member more: the op after the group (not a twin GEMM) is taken in.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first, int64_t size) {
                        steps.ops[first].launches[0].gemm->groupSize = size + 1;
                      }),
                      {"cuda.steps.forward op", "a GEMM group of 4: member op"}));
  // A member with another k.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first, int64_t) {
                        steps.ops[first + 1].launches[0].gemm->k.constant += 1;
                      }),
                      {"a GEMM group of 3: member op", "differs from the first"}));
  // A member that starts a group of its own.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t first, int64_t) {
                        steps.ops[first + 1].launches[0].gemm->groupSize = 2;
                      }),
                      {"starts a group of its own"}));
  // A group running past the steps.
  EXPECT_TRUE(refused(rewritten([](CudaProgramSteps &steps, size_t, int64_t) {
                        for (size_t s = steps.ops.size(); s-- > 0;)
                          if (steps.ops[s].launches[0].gemm) {
                            steps.ops[s].launches[0].gemm->groupSize =
                                int64_t(steps.ops.size() - s) + 1;
                            return;
                          }
                      }),
                      {"runs past the program's steps"}));
}

} // namespace
} // namespace stringrt::test
