// The CUDA backend's building blocks (docs/cuda.md): a device context on the
// driver API, one device arena, the kernels of a "cuda" package loaded as
// modules (the cubin when it matches the device, else the PTX, JIT-compiled
// by the driver), checked kernel launches, and a cuBLAS GEMM.
//
// The driver (libcuda.so.1) is opened with dlopen when first needed, so
// programs linking this library start on machines without a GPU or driver;
// there, Device::open throws an Error saying why (and tests skip). Every
// failure is a stringrt::Error naming the step, the call and, for launches,
// the kernel: "CUDA error in <step>: cuLaunchKernel(pe_add) failed:
// CUDA_ERROR_... (<description>)". Allocation failures say how many bytes
// were asked for and how many are free.
//
// This header does not include cuda.h: device pointers are uint64_t.
#pragma once

#include "stringrt/CudaSection.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace stringrt::cuda {

// Why no CUDA device can be used here ("" when one can): the driver library
// is missing, cuInit fails, or there is no device. Never throws.
std::string unavailableReason();
inline bool available() { return unavailableReason().empty(); }

class Device {
public:
  // The primary context of device `ordinal`, made current on this thread.
  static std::shared_ptr<Device> open(int ordinal = 0);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  int ordinal() const { return ordinal_; }
  const std::string &name() const { return name_; }
  // Compute capability as major * 10 + minor (90 for an H100).
  int computeCapability() const { return capability_; }
  // "sm_90".
  std::string arch() const;
  // The most shared memory a block may have, in bytes, once a function opts
  // in with cuFuncSetAttribute (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).
  int64_t sharedMemoryPerBlockOptin() const;
  // Bytes free / total on the device now.
  size_t freeBytes() const;
  size_t totalBytes() const;
  // Waits for the device; a failure (e.g. a faulting kernel) names `step`.
  void synchronize(const std::string &step) const;

  // Raw device memory; throws "out of device memory in <step>: asked for N
  // bytes, F bytes free of T" when the allocation fails.
  uint64_t allocate(size_t bytes, const std::string &step);
  void release(uint64_t pointer);
  void upload(uint64_t dst, const void *src, size_t bytes, const std::string &step);
  void download(void *dst, uint64_t src, size_t bytes, const std::string &step);

  void *context() const { return context_; }

private:
  Device() = default;
  int ordinal_ = 0;
  int device_ = 0;
  std::string name_;
  int capability_ = 0;
  void *context_ = nullptr;
};

// One device allocation carved by the caller's offsets (the memory plan):
// parameters, gradients, optimizer state and activations all live in it.
class Arena {
public:
  Arena(std::shared_ptr<Device> device, size_t bytes);
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  size_t size() const { return size_; }
  // The device address of [offset, offset + bytes); throws when the range
  // leaves the arena.
  uint64_t at(size_t offset, size_t bytes) const;
  void upload(size_t offset, const void *src, size_t bytes, const std::string &step);
  void download(size_t offset, void *dst, size_t bytes, const std::string &step) const;
  template <typename T> void uploadVector(size_t offset, const std::vector<T> &values) {
    upload(offset, values.data(), values.size() * sizeof(T), "upload");
  }
  template <typename T> std::vector<T> downloadVector(size_t offset, size_t count) const {
    std::vector<T> values(count);
    download(offset, values.data(), count * sizeof(T), "download");
    return values;
  }

private:
  std::shared_ptr<Device> device_;
  uint64_t base_ = 0;
  size_t size_ = 0;
};

// One kernel argument, typed as the kernel's params say.
struct KernelArg {
  CudaParamKind kind;
  uint64_t ptr = 0;
  int64_t i64 = 0;
  float f32 = 0;
  static KernelArg pointer(uint64_t p) { return {CudaParamKind::Ptr, p, 0, 0}; }
  static KernelArg integer(int64_t v) { return {CudaParamKind::I64, 0, v, 0}; }
  static KernelArg real(float v) { return {CudaParamKind::F32, 0, 0, v}; }
};

// Launch shape from a kernel's grid rule and its arguments.
struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  // No block to run: KernelSet::launch skips such a launch (and no other).
  bool empty() const { return grid[0] == 0 || grid[1] == 0 || grid[2] == 0; }
};
// Pure: computes the shape a kernel needs for `args` (no device needed).
// Kernels of grid rule "explicit" take their grid (blocks along x, y, z;
// x < 2^31, y and z <= 65535) and no other kernel does. A grid rule whose
// size is 0 (`elements` over n = 0, ...) gives 0 blocks: nothing to do.
LaunchShape launchShapeFor(const CudaKernel &kernel, const std::vector<KernelArg> &args,
                           const std::array<int64_t, 3> *grid = nullptr);

// The kernels of a "cuda" package, loaded on a device.
class KernelSet {
public:
  // Loads every kernel: the cubin when the package's arch is the device's,
  // else the PTX (the driver JIT-compiles it, with its log in errors).
  KernelSet(std::shared_ptr<Device> device, const CudaSection &section);
  ~KernelSet();
  KernelSet(const KernelSet &) = delete;
  KernelSet &operator=(const KernelSet &) = delete;

  // "cubin" or "ptx": how the kernels were loaded.
  const std::string &loadedFrom() const { return loadedFrom_; }
  bool has(const std::string &kernel) const { return functions_.count(kernel) != 0; }

  // Launches `kernel` with `args` (checked against its params) on `stream`
  // (a CUstream; null: the default stream), with `grid` for kernels of grid
  // rule "explicit". A launch whose grid has 0 blocks (LaunchShape::empty)
  // is skipped; every other launch runs, whatever its i64 arguments (0
  // included). Errors name the kernel and `step`. Asynchronous: a fault
  // shows at the next synchronize.
  void launch(const std::string &kernel, const std::vector<KernelArg> &args,
              const std::string &step, const std::array<int64_t, 3> *grid = nullptr,
              void *stream = nullptr) const;

private:
  std::shared_ptr<Device> device_;
  std::string loadedFrom_;
  std::vector<void *> modules_;
  std::map<std::string, std::pair<const CudaKernel *, void *>> functions_;
  CudaSection section_;
};

// The arithmetic of a GEMM's products; data stays f32 in memory and sums
// are f32 in every case (cuBLAS compute types CUBLAS_COMPUTE_32F,
// CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_32F_FAST_16BF): exact f32,
// TF32 tensor cores (inputs rounded to a 10-bit mantissa), or bf16 tensor
// cores (inputs rounded to an 8-bit mantissa; packages of
// --gpu-precision=bf16).
enum class GemmPrecision { Fp32, Tf32, Bf16 };
const char *gemmPrecisionName(GemmPrecision precision); // "fp32", "tf32", "bf16"

// Row-major GEMM on cuBLAS, f32 data: C[M,N] = alpha op(A) op(B) + beta C,
// op(A) is [M,K] (A stored [M,K], or [K,M] when transA), op(B) is [K,N].
class Gemm {
public:
  explicit Gemm(std::shared_ptr<Device> device);
  ~Gemm();
  Gemm(const Gemm &) = delete;
  Gemm &operator=(const Gemm &) = delete;
  // `inputs` is A's and B's element type, `output` C's: F32, or BF16
  // (stored bf16; then the products are exact in f32 and summed in f32,
  // CUBLAS_COMPUTE_32F, whatever `precision` says; C bf16 only with bf16
  // A and B). A bf16 GEMM runs as one cuBLASLt matmul where it can
  // (runLt), else cublasGemmEx on CUDA_R_16BF.
  void run(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, uint64_t A,
           uint64_t B, float beta, uint64_t C, const std::string &step,
           GemmPrecision precision = GemmPrecision::Fp32, DType inputs = DType::F32,
           DType output = DType::F32) const;
  // `count` GEMMs, matrix i at A + i * strideA (elements; 0 repeats one
  // matrix), likewise B and C (cublasGemmStridedBatchedEx; count 1 is run).
  void runStridedBatched(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                         uint64_t A, int64_t strideA, uint64_t B, int64_t strideB, float beta,
                         uint64_t C, int64_t strideC, int64_t count, const std::string &step,
                         GemmPrecision precision = GemmPrecision::Fp32) const;
  // `count` GEMMs of one shape and types whose matrices are anywhere: the
  // device arrays `pointers` hold 3 x count device addresses, the count
  // B matrices', then the A matrices', then the C matrices' (cuBLAS's
  // column-major order: its A is our B), read when the call runs on the
  // stream (cublasGemmBatchedEx; a grouped GEMM of the step program). The
  // compute type is run()'s: CUBLAS_COMPUTE_32F on bf16 A and B, the
  // precision's on f32.
  void runGrouped(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                  float beta, uint64_t pointers, int64_t count, const std::string &step,
                  GemmPrecision precision = GemmPrecision::Fp32, DType inputs = DType::F32,
                  DType output = DType::F32) const;
  // C[M,N] = alpha op(A) op(B) + bias (bias[N] added to every row) in one
  // cuBLASLt matmul (CUBLASLT_EPILOGUE_BIAS). Returns false, having queued
  // nothing, when it cannot: cuBLASLt missing (biasEpilogueUnavailable()
  // says why), `bias` not 16-byte aligned, or no algorithm for the shape
  // and alignments; the caller then runs the GEMM and adds the bias itself.
  // The bias is of C's type.
  bool runWithBias(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                   uint64_t A, uint64_t B, uint64_t bias, uint64_t C, const std::string &step,
                   GemmPrecision precision = GemmPrecision::Fp32, DType inputs = DType::F32,
                   DType output = DType::F32) const;
  // C[M,N] = alpha op(A) op(B) and biasGrad[N] = the sums of op(B) [K,N]
  // over K (a dense layer's weight and bias gradients, B = dY) in one
  // cuBLASLt matmul (CUBLASLT_EPILOGUE_BGRADA: our B is cuBLASLt's A; the
  // sums in f32, written in C's type). Returns false, having queued
  // nothing, when it cannot (as runWithBias: cuBLASLt missing, `biasGrad`
  // not 16-byte aligned, no algorithm); the caller then runs the GEMM and
  // sums B itself.
  bool runWithBiasGradient(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                           float alpha, uint64_t A, uint64_t B, uint64_t biasGrad, uint64_t C,
                           const std::string &step, GemmPrecision precision = GemmPrecision::Fp32,
                           DType inputs = DType::F32, DType output = DType::F32) const;
  // C = alpha op(A) op(B) + beta addend (+ bias when `bias` is not 0) in
  // one cuBLASLt matmul whose C (the addend, of C's type and shape) is not
  // its D (our C): a dense layer's residual add or a gradient sum as the
  // GEMM's epilogue. `addend` may be C itself. Returns false, having queued
  // nothing, when it cannot (as runWithBias; a bias then needs 16 bytes'
  // alignment too); the caller copies the addend into C and runs the GEMM
  // with beta.
  bool runWithAddend(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                     uint64_t A, uint64_t B, float beta, uint64_t addend, uint64_t bias,
                     uint64_t C, const std::string &step,
                     GemmPrecision precision = GemmPrecision::Fp32, DType inputs = DType::F32,
                     DType output = DType::F32) const;
  // C = alpha op(A) op(B) + beta addend (+ bias when `bias` is not 0) as
  // one cuBLASLt matmul, the addend C itself when 0; false, having queued
  // nothing, when it cannot (as runWithBias). With `biasGradient`, `bias`
  // is written, not read: the sums of op(B) over K (CUBLASLT_EPILOGUE_BGRADA,
  // beta 0, no addend). The algorithm the heuristic picks for each new
  // shape is recorded (chosenAlgorithms).
  bool runLt(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, uint64_t A,
             uint64_t B, float beta, uint64_t C, uint64_t bias, const std::string &step,
             GemmPrecision precision, DType inputs, DType output, uint64_t addend = 0,
             bool biasGradient = false) const;
  // One line per distinct cuBLASLt call shape run so far: the types,
  // transposes, m n k, epilogue, and the algorithm cuBLASLt's heuristic
  // picked (its id, tile, stages, split-K, from
  // cublasLtMatmulAlgoConfigGetAttribute), in first-use order.
  std::vector<std::string> chosenAlgorithms() const;
  // Why runWithBias (and runWithBiasGradient) always declines (cuBLASLt
  // not loaded), or "".
  std::string biasEpilogueUnavailable() const;
  // y[i] += alpha x[i] for i < n, f32 (cublasSaxpy, on the stream; n = 0
  // queues nothing): the device executor's gradient accumulation.
  void axpy(int64_t n, float alpha, uint64_t x, uint64_t y, const std::string &step) const;
  // Later GEMMs run on `stream` (a CUstream; null: the default stream).
  void setStream(void *stream);
  // A caller-owned workspace (cublasSetWorkspace, and cuBLASLt's), so that
  // GEMMs captured in a CUDA graph allocate nothing.
  void setWorkspace(uint64_t pointer, size_t bytes);

private:
  std::shared_ptr<Device> device_;
  void *handle_ = nullptr;
  void *ltHandle_ = nullptr; // cublasLtHandle_t, null without cuBLASLt
  void *stream_ = nullptr;
  uint64_t workspace_ = 0;
  size_t workspaceBytes_ = 0;
  mutable std::vector<std::string> algorithms_; // chosenAlgorithms(), by shape
  void recordAlgorithm(const void *lt, const void *algo, DType inputs, DType output, bool transA,
                       bool transB, int m, int n, int k, const char *epilogue,
                       bool addend) const;
};

} // namespace stringrt::cuda
