//===- BadKernelPackageTest.cpp - damaged "cpu" packages are refused ------===//
//
// A valid "cpu" package is compiled once, then rewritten with one thing
// wrong at a time: Package::load (or Model, for kernels this CPU cannot
// run) must refuse it with a message that says what is wrong.
//
//===----------------------------------------------------------------------===//
#include "CodegenTestUtil.h"

#include "stringrt/Error.h"
#include "stringrt/KernelLibrary.h"
#include "stringrt/Safetensors.h"

#include <cstring>

using namespace stringc::codegen::test;

namespace {

constexpr const char *kTiny = R"mlir(
module @tiny {
  pe.optimizer {kind = "sgd"}
  func.func @forward(%x: tensor<?x4xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}, tensor<?x4xf32> {pe.output = "y"}) {
    %0 = pe.relu %x : tensor<?x4xf32> -> tensor<?x4xf32>
    %loss = pe.mean %0 : tensor<?x4xf32> -> tensor<f32>
    return %loss, %0 : tensor<f32>, tensor<?x4xf32>
  }
  func.func @gradients(%x: tensor<?x4xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
    %loss = pe.mean %x : tensor<?x4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
)mlir";

class BadKernelPackage : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(writeCpuPackage(kTiny, dir.file("good.pkg")), "");
    stringrt::SafetensorsFile file = stringrt::SafetensorsFile::open(dir.file("good.pkg"));
    metadata = file.metadata();
    library = file.readBytes(stringrt::kKernelSection);
  }

  /// Writes a package of these parts and returns Package::load's error
  /// ("" when it loads).
  std::string loadError(const std::map<std::string, std::string> &meta,
                        const std::vector<uint8_t> &bytes, bool withSection = true,
                        bool extraTensor = false) {
    std::string path = dir.file("bad" + std::to_string(count++) + ".pkg");
    std::vector<stringrt::TensorView> tensors;
    if (withSection)
      tensors.push_back({stringrt::kKernelSection, stringrt::DType::U8,
                         {int64_t(bytes.size())}, bytes.data()});
    float extra = 1.0f;
    if (extraTensor)
      tensors.push_back({"weights", stringrt::DType::F32, {1}, &extra});
    stringrt::writeSafetensors(path, tensors, meta);
    try {
      stringrt::Package::load(path);
    } catch (const stringrt::Error &e) {
      return e.what();
    }
    return "";
  }

  /// The metadata with the checksum of `bytes`.
  std::map<std::string, std::string> resummed(const std::vector<uint8_t> &bytes) const {
    auto meta = metadata;
    meta["kernels_checksum"] = stringrt::kernelChecksum(bytes.data(), bytes.size());
    return meta;
  }

  ScratchDir dir;
  std::map<std::string, std::string> metadata;
  std::vector<uint8_t> library;
  int count = 0;
};

TEST_F(BadKernelPackage, TheGoodOneLoads) {
  EXPECT_EQ(loadError(metadata, library), "");
  EXPECT_EQ(metadata.at("version"), "3");
  EXPECT_EQ(metadata.at("target"), "cpu");
  EXPECT_FALSE(metadata.at("kernels_triple").empty());
  EXPECT_FALSE(metadata.at("kernels_cpu").empty());
}

#define EXPECT_CONTAINS(text, part)                                                           \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text)

TEST_F(BadKernelPackage, CorruptLibrary) {
  std::vector<uint8_t> bytes = library;
  bytes[bytes.size() / 2] ^= 0x5a;
  EXPECT_CONTAINS(loadError(metadata, bytes), "the kernel library is corrupt: checksum");
}

TEST_F(BadKernelPackage, NotAnElfFile) {
  std::vector<uint8_t> bytes(64, 0x42);
  EXPECT_CONTAINS(loadError(resummed(bytes), bytes), "the kernel library is not an ELF file");
}

TEST_F(BadKernelPackage, TruncatedLibrary) {
  // With a matching checksum (a deliberate edit, not an accident): the ELF
  // checks catch what would make the loader fault.
  for (size_t keep : {library.size() / 3, library.size() - 1, size_t(100)}) {
    std::vector<uint8_t> bytes(library.begin(), library.begin() + keep);
    EXPECT_CONTAINS(loadError(resummed(bytes), bytes), "the kernel library is");
  }
}

TEST_F(BadKernelPackage, DamagedProgramHeaders) {
  std::vector<uint8_t> bytes = library;
  // e_phoff (offset 32) pointing past the end.
  uint64_t far = bytes.size();
  std::memcpy(bytes.data() + 32, &far, sizeof far);
  EXPECT_CONTAINS(loadError(resummed(bytes), bytes), "program header table");
}

TEST_F(BadKernelPackage, MissingLibrary) {
  EXPECT_CONTAINS(loadError(metadata, library, /*withSection=*/false),
                  "target cpu needs the kernel library (tensor \"kernels.so\")");
}

TEST_F(BadKernelPackage, ExtraTensor) {
  EXPECT_CONTAINS(loadError(metadata, library, true, /*extraTensor=*/true),
                  "unknown tensor \"weights\" in a cpu package");
}

TEST_F(BadKernelPackage, MissingSymbol) {
  auto meta = metadata;
  std::string &manifest = meta["manifest"];
  size_t at = manifest.find("stringc_k0_");
  ASSERT_NE(at, std::string::npos);
  manifest.replace(at, 11, "stringc_k9_");
  EXPECT_CONTAINS(loadError(meta, library),
                  "ops[0] (pe.relu): the kernel library has no kernel \"stringc_k9_");
}

// The value table edited consistently to rows of 8 (inputs, values and
// shapes agree, so every other check passes): the relu kernel was built for
// rows of 4, and its symbol's digest says so.
TEST_F(BadKernelPackage, ValueTableEditedToOtherSizes) {
  auto meta = metadata;
  std::string &manifest = meta["manifest"];
  size_t edits = 0;
  for (size_t at = manifest.find("[-1,4]"); at != std::string::npos;
       at = manifest.find("[-1,4]", at)) {
    manifest.replace(at, 6, "[-1,8]");
    ++edits;
  }
  ASSERT_GE(edits, 3u);
  const std::string built = stringrt::kernelSizeDigest({{-1, 4}, {-1, 4}});
  const std::string edited = stringrt::kernelSizeDigest({{-1, 8}, {-1, 8}});
  EXPECT_CONTAINS(loadError(meta, library),
                  "ops[0] (pe.relu).kernels[0]: kernel \"stringc_k0_" + built +
                      "_relu\" was generated for buffers of other sizes than the value table "
                      "gives this op (digest " +
                      built + ", the value table's " + edited + ")");
}

TEST_F(BadKernelPackage, MissingMetadata) {
  auto meta = metadata;
  meta.erase("kernels_checksum");
  EXPECT_CONTAINS(loadError(meta, library), "target cpu needs \"kernels_checksum\"");
}

TEST_F(BadKernelPackage, Versions) {
  auto meta = metadata;
  meta["version"] = "1";
  EXPECT_CONTAINS(loadError(meta, library), "target \"cpu\" needs package version 2");
  meta["version"] = "4";
  EXPECT_CONTAINS(loadError(meta, library), "unsupported package version \"4\"");
  // Version 2 sized the arena plans in 4-byte elements: read as such, this
  // package's byte-sized plan no longer adds up to its report.
  meta["version"] = "2";
  EXPECT_CONTAINS(loadError(meta, library), "arena.report: arena_bytes");
  EXPECT_CONTAINS(loadError(meta, library), "(package version 2: 4-byte elements, slots packed)");
}

TEST_F(BadKernelPackage, KernelsInAReferencePackage) {
  auto meta = metadata;
  meta["target"] = "cpu-reference";
  for (const char *key : {"kernels_triple", "kernels_cpu", "kernels_features", "kernels_checksum"})
    meta.erase(key);
  EXPECT_CONTAINS(loadError(meta, library, /*withSection=*/false),
                  "names a compiled kernel, but target \"cpu-reference\" has none");
}

TEST_F(BadKernelPackage, BadKernelEntries) {
  auto withManifest = [&](const std::string &from, const std::string &to) {
    auto meta = metadata;
    std::string &manifest = meta["manifest"];
    size_t at = manifest.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos)
      manifest.replace(at, from.size(), to);
    return loadError(meta, library);
  };
  EXPECT_CONTAINS(withManifest("\"range\":-1", "\"range\":0"), ".kernels[0].range: must be -1");
  const std::string relu =
      "stringc_k0_" + stringrt::kernelSizeDigest({{-1, 4}, {-1, 4}}) + "_relu";
  EXPECT_CONTAINS(withManifest("\"symbol\":\"" + relu + "\"", "\"symbol\":\"a-b\""),
                  "is not a C identifier");
  // [B, 4] rows: 4096 rows make a chunk of 16384 elements.
  EXPECT_CONTAINS(withManifest("\"grain\":4096", "\"grain\":0"), ".kernels[0].grain: must be in");
}

TEST_F(BadKernelPackage, KernelsThisCpuCannotRun) {
  // A feature this CPU lacks, if the runtime can test one.
  std::string lacking;
  for (const char *f : {"avx512er", "avx512vp2intersect", "avx512f", "avx2", "fma", "avx"})
    if (!stringrt::missingCpuFeatures(std::string("+") + f).empty())
      lacking = f;
  if (lacking.empty())
    GTEST_SKIP() << "this CPU has every feature the runtime tests";
  auto meta = metadata;
  meta["kernels_features"] += ",+" + lacking;
  std::string path = dir.file("future.pkg");
  stringrt::writeSafetensors(path,
                             {{stringrt::kKernelSection, stringrt::DType::U8,
                               {int64_t(library.size())}, library.data()}},
                             meta);
  stringrt::Package package = stringrt::Package::load(path); // loads: nothing runs yet
  EXPECT_CONTAINS(package.kernelsUnavailable(), "this CPU lacks " + lacking);
  EXPECT_FALSE(package.kernelLibraryLoaded());
  EXPECT_EQ(stringrt::Model(package).kernels(), stringrt::KernelSet::Fast);
  try {
    stringrt::Model model(package, stringrt::KernelSet::Compiled);
    ADD_FAILURE() << "compiled kernels for a CPU this one is not";
  } catch (const stringrt::Error &e) {
    EXPECT_CONTAINS(e.what(), "this CPU lacks " + lacking);
  }
}

TEST_F(BadKernelPackage, CompiledNeedsKernels) {
  auto meta = metadata;
  meta["target"] = "cpu-reference";
  for (const char *key : {"kernels_triple", "kernels_cpu", "kernels_features", "kernels_checksum"})
    meta.erase(key);
  // The manifest without its "kernels" entries.
  std::string &manifest = meta["manifest"];
  size_t at = manifest.find(",\"kernels\":[");
  ASSERT_NE(at, std::string::npos);
  manifest.erase(at, manifest.find(']', at) + 1 - at);
  ASSERT_EQ(manifest.find("\"kernels\""), std::string::npos);
  std::string path = dir.file("reference.pkg");
  stringrt::writeSafetensors(path, {}, meta);
  stringrt::Package package = stringrt::Package::load(path);
  EXPECT_FALSE(package.hasKernels());
  EXPECT_EQ(stringrt::Model(package).kernels(), stringrt::KernelSet::Fast);
  try {
    stringrt::Model model(package, stringrt::KernelSet::Compiled);
    ADD_FAILURE() << "compiled kernels without a library";
  } catch (const stringrt::Error &e) {
    EXPECT_CONTAINS(e.what(), "the package has no compiled kernels");
  }
}

} // namespace
