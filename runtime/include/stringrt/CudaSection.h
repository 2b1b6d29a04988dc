// The GPU part of a package of target "cuda" (docs/package.md, "Target
// cuda"; docs/cuda.md): the kernel table of the `cuda` metadata entry and each
// kernel's PTX and cubin. Plain data: no CUDA needed to read or validate it.
#pragma once

#include "stringrt/Manifest.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stringrt {

class SafetensorsFile;

// The target name of packages with GPU kernels.
constexpr const char *kCudaTarget = "cuda";

enum class CudaParamKind { Ptr, I64, F32 };
// How the runtime sizes a launch's grid (GPUKernels.h in the compiler):
// Elements: grid-stride over n = the first i64 parameter, blockDim (block[0]);
// Rows: one warp per row, blockDim (32, block[1]), rows = the first i64;
// Columns: one thread per column, columns = the second i64;
// Partials: one warp per block, grid = min(ceil(n / 32), 1024) partials.
// Explicit: each launch of the kernel names its grid (CudaLaunch::grid).
enum class CudaGridRule { Elements, Rows, Columns, Partials, Explicit };

// The most blocks a grid-stride kernel (Elements, Columns) is given: it
// loops over the rest. And the most partial results of a Partials kernel.
constexpr int64_t kCudaMaxStrideBlocks = 65536;
constexpr int64_t kCudaMaxPartials = 1024;

// grid.x of a kernel of a rule other than Explicit, from its block shape and
// its first and second i64 arguments (0 when the kernel has none); 0 when
// there is no work (the launch is skipped). The runtime launches with it and
// the compiler's launch report predicts with it.
int64_t cudaRuleGridX(CudaGridRule rule, int64_t blockX, int64_t blockY, int64_t firstInt,
                      int64_t secondInt);

// Kernels the runtime launches itself, outside the programs: the
// optimizer's (use program "optimizer") and the augmentation of the
// training images as each batch enters its step (use program "data"):
// out, in, draws (Augment.h's words), n, channels, height, width.
inline constexpr char kAugmentImagesKernel[] = "pe_augment_images";
// The bf16 copy of the parameters (a package whose steps store a
// pe.get_param result in bf16) is rewritten from the f32 parameters by this
// kernel (y bf16, x f32, n, n_x = n; use program "optimizer") after every
// change of them: the optimizer's update, uploads, the EMA's swaps.
inline constexpr char kBf16ParamsKernel[] = "pe_broadcast_to__bf";
// pe_adamw with the bf16 copy of the parameters it updates as an eleventh
// argument (param_bf16), written as it updates them; in packages with the
// copy and AdamW.
inline constexpr char kAdamWBf16Kernel[] = "pe_adamw_bf16";

// The most dynamic shared memory a package's kernel may ask for: 99 KiB,
// what every GPU from sm_86 on gives a block (sm_80 and sm_90 give more).
inline constexpr int64_t kMaxDynamicSharedBytes = 99 * 1024;

struct CudaKernelUse {
  std::string program; // "forward", "gradients", "optimizer" or "data"
  int64_t op = -1;     // op index in the program; -1 for "optimizer" and "data"
};

struct CudaKernel {
  std::string name; // the PTX entry point
  std::string op;   // the pe op it implements ("pe.optimizer" for AdamW)
  std::vector<CudaParamKind> params;
  CudaGridRule grid = CudaGridRule::Elements;
  int64_t blockX = 1, blockY = 1;
  // Bytes of dynamic shared memory a block is launched with (0: static shared
  // memory only, at most 48 KiB). A kernel that needs more keeps all of its
  // shared memory in one `extern .shared` array: the runtime raises the
  // function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to this and
  // launches with it. At most kMaxDynamicSharedBytes.
  int64_t dynamicShared = 0;
  std::string ptx;               // PTX text (JIT-compiled when no cubin fits)
  std::vector<uint8_t> cubin;    // for CudaSection::arch
  std::vector<CudaKernelUse> uses;
};

// The step program (docs/cuda.md, "The step program"): what each op of
// @forward and @gradients does on the device, as ordered launches of the
// kernels or cuBLAS GEMMs, with arguments bound to the op's operands,
// results and scratch buffers or to integers that depend on the batch.

// perBatch * batch + constant. The compiler's step program uses these types
// as they are (cudagen::BatchAffine, LaunchArg, GemmCall, ConstantArray).
struct CudaAffine {
  int64_t perBatch = 0;
  int64_t constant = 0;
  static CudaAffine fixed(int64_t c) { return {0, c}; }
  int64_t at(int64_t batch) const { return perBatch * batch + constant; }
  bool operator==(const CudaAffine &o) const {
    return perBatch == o.perBatch && constant == o.constant;
  }
};

// Constant: a device pointer to CudaSection::constants[index] (an index
// table of an op's attribute), uploaded once per device model.
// StepKey: a device pointer to the step's key of random masks (StepKey in
// DropoutMask.h) as four u32 words: seed's low and high halves, step,
// firstSample. The runtime writes it before each step (stream-ordered, outside
// any CUDA graph), so a replayed step draws its own masks.
// GroupTable: a device pointer to the pointer table of the launch's kernel
// group (CudaLaunch::groupSize), only in such a launch.
// Tickets: a device pointer to the device model's ticket counters
// (CudaSection::ticketWords() u32 words, zeroed once when the model is
// made): a column sum's blocks count themselves in word blockIdx.x, and the
// last block of each column group resets its word to 0, so every launch
// finds them at 0 (the model's launches run one at a time, on one stream).
// Only in a launch of an explicit grid whose x is fixed.
enum class CudaArgKind { Operand, Result, Scratch, I64, F32, Constant, StepKey, GroupTable, Tickets };

// The u32 words of the step key buffer (CudaArgKind::StepKey).
enum StepKeyWord : int {
  kStepKeySeedLow = 0,
  kStepKeySeedHigh = 1,
  kStepKeyStep = 2,
  kStepKeyFirstSample = 3,
  kStepKeyWords = 4,
};

// The most ticket counters a launch may count in (its grid x).
inline constexpr int64_t kMaxTicketWords = int64_t(1) << 20;

struct CudaArg {
  CudaArgKind kind = CudaArgKind::I64;
  int64_t index = 0;   // Operand, Result, Scratch, Constant
  CudaAffine integer;  // I64
  float real = 0.0f;   // F32

  static CudaArg operand(int64_t k) { return {CudaArgKind::Operand, k, {}, 0.0f}; }
  static CudaArg result(int64_t k) { return {CudaArgKind::Result, k, {}, 0.0f}; }
  static CudaArg scratch(int64_t k) { return {CudaArgKind::Scratch, k, {}, 0.0f}; }
  static CudaArg i64(CudaAffine v) { return {CudaArgKind::I64, 0, v, 0.0f}; }
  static CudaArg i64(int64_t v) { return {CudaArgKind::I64, 0, CudaAffine::fixed(v), 0.0f}; }
  static CudaArg f32(float v) { return {CudaArgKind::F32, 0, {}, v}; }
  static CudaArg constant(int64_t k) { return {CudaArgKind::Constant, k, {}, 0.0f}; }
  static CudaArg stepKey() { return {CudaArgKind::StepKey, 0, {}, 0.0f}; }
  static CudaArg groupTable() { return {CudaArgKind::GroupTable, 0, {}, 0.0f}; }
  static CudaArg tickets() { return {CudaArgKind::Tickets, 0, {}, 0.0f}; }
  bool isPointer() const {
    return kind == CudaArgKind::Operand || kind == CudaArgKind::Result ||
           kind == CudaArgKind::Scratch || kind == CudaArgKind::Constant ||
           kind == CudaArgKind::StepKey || kind == CudaArgKind::GroupTable ||
           kind == CudaArgKind::Tickets;
  }
};

// A read-only array the launches index with (`cuda.constants`): i32 or f32
// values (4 bytes each), the same for every batch size.
struct CudaConstant {
  DType dtype = DType::I32; // I32 or F32
  std::vector<int32_t> i32; // DType::I32
  std::vector<float> f32;   // DType::F32

  static CudaConstant ints(std::vector<int32_t> values) {
    return {DType::I32, std::move(values), {}};
  }
  static CudaConstant floats(std::vector<float> values) {
    return {DType::F32, {}, std::move(values)};
  }
  bool operator==(const CudaConstant &o) const {
    return dtype == o.dtype && i32 == o.i32 && f32 == o.f32;
  }
  size_t size() const { return dtype == DType::I32 ? i32.size() : f32.size(); }
  const void *data() const {
    return dtype == DType::I32 ? static_cast<const void *>(i32.data())
                               : static_cast<const void *>(f32.data());
  }
};

// Row-major strided-batched SGEMM: C_i = alpha op(A_i) op(B_i) + beta C_i
// for i < count, op(A_i) m x k, op(B_i) k x n, strides in elements.
// With epilogue Bias ("epilogue": "bias"), `bias` (n floats) is added to
// every row of C (count 1, beta 0): one cuBLASLt matmul, or the GEMM then
// the package's pe_add_bias kernel (pe_add_bias__bb when C is bf16).
// With an `addend` ("addend": an argument; count 1, beta != 0), the term
// beta scales is read from the addend instead of C, which is only written:
// C = alpha op(A) op(B) + beta addend (+ bias), one cuBLASLt matmul with
// its C and D apart (the residual add or gradient sum of a dense layer as
// the GEMM's epilogue), or a device copy of the addend into C and then the
// GEMM where cuBLASLt cannot run it. A bias epilogue takes beta 0 unless
// an addend is given.
// The matrices' element types are their values' (CudaProgramSteps::
// valueDTypes): A and B both f32 or both bf16; C bf16 only with bf16 A and
// B; the bias and the addend of C's type.
// With epilogue BiasGrad ("epilogue": "bias_grad"; count 1, beta 0, no
// addend, not grouped), the GEMM also writes the sum of op(B) over k (n
// elements of C's type: a dense layer's bias gradient, the column sums of
// dY when B is dY) into `bias`, which names a result of the op of the next
// entry of the program's steps (only free ops between), not of its own:
// that entry's steps compute the same sums (pe.sum_to's column sum) and
// are its fallback. The runtime runs the GEMM as one cuBLASLt matmul with
// CUBLASLT_EPILOGUE_BGRADA (our B is cuBLASLt's A) and then skips the next
// entry, or, where cuBLASLt cannot, the plain GEMM and the next entry's own
// launches.
enum class CudaGemmEpilogue { None, Bias, BiasGrad };
// The kernel a bias epilogue falls back to, by C's storage type:
// "pe_add_bias" (f32) or "pe_add_bias__bb" (bf16 C and bias).
const char *cudaBiasFallbackKernel(DType c);
struct CudaGemm {
  CudaArg a, b, c;
  CudaAffine m, n, k, count{0, 1}, strideA, strideB, strideC;
  bool transA = false, transB = false;
  float alpha = 1.0f, beta = 0.0f;
  CudaGemmEpilogue epilogue = CudaGemmEpilogue::None;
  CudaArg bias; // epilogue Bias; BiasGrad: a result of the next entry's op
  std::optional<CudaArg> addend; // read in C's place by beta (count 1)
  // A grouped GEMM ("group": N in the package): on the first GEMM of a
  // run of N >= 2 ops of the program's steps (consecutive entries, only
  // free ops between them in the program), each of which is this one GEMM
  // launch alone: count 1, no epilogue, no addend, the same m, n, k,
  // transposes, alpha, beta and storage types of A, B and C, A and B
  // operands and C a result of its op, no member reading or writing a
  // value an earlier member writes. The runtime runs the N GEMMs as one
  // cublasGemmBatchedEx over arrays of their pointers. Or, on a later
  // launch l of the first op of a kernel group of first launches
  // (CudaLaunch::groupSize on its first launch), N that group's size: launch
  // l of each member is this GEMM (count 1, no epilogue, no addend, the same
  // arguments: A, B and C operands, results or scratch, the members' scratch
  // kept apart), which the runtime runs as one cublasGemmBatchedEx at the
  // first op's launch l, skipping it in the others. 1: not grouped (also on
  // the group's other members).
  int64_t groupSize = 1;
};

struct CudaLaunch {
  int64_t kernel = -1; // index in CudaSection::kernels; -1 for a GEMM
  std::vector<CudaArg> args;
  std::optional<CudaGemm> gemm;
  std::optional<std::array<CudaAffine, 3>> grid; // kernels of grid rule explicit
  // A kernel group ("group": {"size": N, "args": [...]}): the launch, its op's
  // first, does that (its only one: all) of the op and of the next N - 1 ops
  // (its members: only free ops between them, the same op, operand and result
  // types and launch count, none reading or writing a value an earlier one
  // writes), which the runtime then skips in their steps. Its GroupTable
  // argument points to a table of N x groupArgs.size() device addresses,
  // member-major: groupArgs (operands, results; scratch after a first launch,
  // kept apart: checkGroupScratch) bound against each member, written when a
  // batch's buffers are placed. 1: no group.
  int64_t groupSize = 1;
  std::vector<CudaArg> groupArgs;
};

struct CudaOpSteps {
  int64_t op = -1; // index in the program's ops
  std::vector<CudaAffine> scratchBytes;
  std::vector<CudaLaunch> launches;
};

struct CudaProgramSteps {
  std::string program; // "forward" or "gradients"
  std::vector<CudaOpSteps> ops; // in program order
  // The storage type of the program's values on the device, where it is
  // not F32 ("value_dtypes" in the package): (value id, BF16) pairs in
  // increasing id order. A BF16 value holds bf16 elements (2 bytes each, in
  // the value's f32-sized buffer); a BF16 pe.get_param result is the
  // parameter's slice of the bf16 copy of the parameters. Only packages of
  // precision bf16 have any. Inputs, outputs and arith.constant results are
  // always F32.
  std::vector<std::pair<int64_t, DType>> valueDTypes;
  // The storage type of value `v` (F32 unless listed).
  DType dtypeOf(int64_t v) const;
};

struct CudaSection {
  std::string arch; // "sm_90": the cubins' architecture
  // The attention kernels' arithmetic (stringc --gpu-precision): "fp32", or
  // "bf16" (tensor-core kernels: bf16 operands, f32 accumulation).
  std::string precision = "fp32";
  std::vector<CudaKernel> kernels;
  // How many compute ops of the two programs have a kernel, and the op
  // names of those that do not (per program), as the compiler saw them.
  int64_t ops = 0, opsWithKernel = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> opsWithoutKernel;

  // The step program of "forward" and "gradients" (both always present).
  std::vector<CudaProgramSteps> steps;
  // The constant arrays the steps' launches read ({"constant": k}); each is
  // read by at least one launch.
  std::vector<CudaConstant> constants;

  // nullptr when there is no kernel of that name.
  const CudaKernel *find(std::string_view name) const;
  // Whether some launch reads the step key (CudaArgKind::StepKey).
  bool usesStepKey() const;
  // The u32 ticket counters the launches need (CudaArgKind::Tickets): the
  // largest grid x of a launch taking them; 0 when none does.
  int64_t ticketWords() const;
  // The steps of `program`; nullptr when the section has none for it.
  const CudaProgramSteps *stepsOf(std::string_view program) const;
  // Whether some value of the steps is stored in bf16 (valueDTypes).
  bool storesBf16() const;
};

// Parses and validates the `cuda` metadata JSON of the package `path`
// against its tensors (`ptx.<kernel>` and `cubin.<kernel>`, U8, nothing
// else) and its manifest (uses name existing ops of the kernel's op kind).
// Throws Error("<path>: ...").
CudaSection parseCudaSection(const std::string &json, const SafetensorsFile &file,
                             const Manifest &manifest, const std::string &path);

// The inverse (CudaSectionWriter.cpp): the `cuda` metadata JSON of `section`
// (the kernels' PTX and cubins go into the package's tensors, writePackage in
// Package.h), read back by parseCudaSection as the same section. Throws
// stringrt::Error for what the format cannot hold (a non-finite f32, a launch
// of a kernel not in the section).
std::string writeCudaSectionJson(const CudaSection &section);

const char *cudaParamKindName(CudaParamKind kind);
const char *cudaGridRuleName(CudaGridRule rule);

} // namespace stringrt
