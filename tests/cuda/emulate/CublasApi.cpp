// The cuBLAS entries the runtime uses (runtime/src/cuda/Blas.h), on the host:
// GEMMs with cuBLAS's column-major semantics (lda, ldb, ldc, transposes,
// alpha, beta; beta = 0 never reads C), enqueued on the handle's stream like
// the driver's operations (so captured into graphs). Every matrix must lie
// inside one device allocation (else CUBLAS_STATUS_INVALID_VALUE at the
// call). The inputs are rounded as the tensor cores would read them
// (EmulatedGemm.h): to TF32 with CUBLAS_TF32_TENSOR_OP_MATH or
// CUBLAS_COMPUTE_32F_FAST_TF32, to bf16 with CUBLAS_COMPUTE_32F_FAST_16BF;
// products are summed in f32 in k order.
#include "EmulatedGemm.h"
#include "Emulator.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#define STRINGRT_EMU_EXPORT extern "C" __attribute__((visibility("default")))

namespace stringrt::emulator {
namespace {

struct Handle {
  CUstream stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

std::set<Handle *> &handles() {
  static std::set<Handle *> live;
  return live;
}

Handle *handleOf(cublasHandle_t h) {
  auto *handle = reinterpret_cast<Handle *>(h);
  return handles().count(handle) ? handle : nullptr;
}

// cuBLAS's argument checks (CUBLAS_STATUS_INVALID_VALUE).
bool validShape(const GemmShape &g) {
  int rowsA = g.transA ? g.k : g.m, rowsB = g.transB ? g.n : g.k;
  return g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batches >= 0 && g.lda >= std::max(1, rowsA) &&
         g.ldb >= std::max(1, rowsB) && g.ldc >= std::max(1, g.m);
}

// Bytes [first, last] of a column-major matrix of `rows` x `cols`, `count`
// of them `stride` apart, inside one allocation.
bool matrixInside(const void *base, int rows, int cols, int ld, long long stride, int count,
                  const char *name, bool bf16 = false) {
  if (rows == 0 || cols == 0 || count == 0)
    return true;
  const uint64_t size = bf16 ? 2 : 4;
  for (int i = 0; i < count; ++i) {
    uint64_t first = uint64_t(base) + uint64_t(i * stride) * size;
    uint64_t span = (uint64_t(cols - 1) * ld + rows) * size;
    if (!insideAllocation(uint64_t(first), span,
                          fmt::format("cuBLAS GEMM matrix {} (batch {})", name, i)))
      return false;
  }
  return true;
}

// Every matrix the GEMM reads or writes inside one allocation.
bool matricesInside(const GemmShape &g) {
  int rowsA = g.transA ? g.k : g.m, colsA = g.transA ? g.m : g.k;
  int rowsB = g.transB ? g.n : g.k, colsB = g.transB ? g.k : g.n;
  if (g.k > 0 && g.alpha != 0.0f &&
      (!matrixInside(g.A, rowsA, colsA, g.lda, g.strideA, g.batches, "A", g.bf16Inputs) ||
       !matrixInside(g.B, rowsB, colsB, g.ldb, g.strideB, g.batches, "B", g.bf16Inputs)))
    return false;
  if (g.bias && !matrixInside(g.bias, g.m, 1, g.m, 0, 1, "bias", g.bf16Output))
    return false;
  if (g.biasGradA && !matrixInside(g.biasGradA, g.m, 1, g.m, 0, 1, "bias gradient (of A)",
                                   g.bf16Output))
    return false;
  if (g.biasGradB && !matrixInside(g.biasGradB, g.n, 1, g.n, 0, 1, "bias gradient (of B)",
                                   g.bf16Output))
    return false;
  if (g.source && g.beta != 0.0f &&
      !matrixInside(g.source, g.m, g.n, g.ldc, g.strideC, g.batches, "C (the source)",
                    g.bf16Output))
    return false;
  return matrixInside(g.C, g.m, g.n, g.ldc, g.strideC, g.batches, "C", g.bf16Output);
}

float widen(uint16_t bf16) {
  uint32_t bits = uint32_t(bf16) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

uint16_t narrow(float x) {
  if (std::isnan(x))
    return 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16); // to nearest even
}

// Element `index` of a matrix of f32 or bf16 elements.
float element(const void *base, size_t index, bool bf16) {
  return bf16 ? widen(static_cast<const uint16_t *>(base)[index])
              : static_cast<const float *>(base)[index];
}

CUresult runGemm(const GemmShape &g) {
  auto in = [&](float x) { return roundInput(x, g.rounding); };
  const size_t inSize = g.bf16Inputs ? 2 : 4, outSize = g.bf16Output ? 2 : 4;
  const size_t m = size_t(std::max(g.m, 0)), n = size_t(std::max(g.n, 0)),
               k = size_t(std::max(g.k, 0));
  // op(A) and op(B) as the tensor cores read them (rounded once each, not
  // once per use): column p of op(A) and column j of op(B) contiguous. Not
  // read at all when alpha is 0.
  std::vector<float> a(g.alpha != 0.0f ? m * k : 0), b(g.alpha != 0.0f ? k * n : 0);
  std::vector<float> product(m * n);
  for (int batch = 0; batch < g.batches; ++batch) {
    const char *A = reinterpret_cast<const char *>(g.A) + batch * g.strideA * inSize;
    const char *B = reinterpret_cast<const char *>(g.B) + batch * g.strideB * inSize;
    char *C = reinterpret_cast<char *>(g.C) + batch * g.strideC * outSize;
    const char *source = g.source ? reinterpret_cast<const char *>(g.source) +
                                        batch * g.strideC * outSize
                                  : C;
    if (g.alpha != 0.0f) {
      for (size_t p = 0; p < k; ++p)
        for (size_t i = 0; i < m; ++i)
          a[p * m + i] = in(element(A, g.transA ? p + i * g.lda : i + p * g.lda, g.bf16Inputs));
      for (size_t j = 0; j < n; ++j)
        for (size_t p = 0; p < k; ++p)
          b[j * k + p] = in(element(B, g.transB ? j + p * g.ldb : p + j * g.ldb, g.bf16Inputs));
      // Each element: f32 FMA over p in k order from 0.
      gemmProduct(a.data(), b.data(), product.data(), int(m), int(n), int(k));
    } else {
      std::fill(product.begin(), product.end(), 0.0f);
    }
    // The bias-gradient epilogues (one batch: cuBLASLt's batch stride of
    // the bias is not emulated): the stored elements summed over k.
    auto store = [&](void *out, size_t index, float value) {
      if (g.bf16Output)
        static_cast<uint16_t *>(out)[index] = narrow(value);
      else
        static_cast<float *>(out)[index] = value;
    };
    if (g.biasGradA)
      for (size_t i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (size_t p = 0; p < k; ++p)
          sum += element(A, g.transA ? p + i * g.lda : i + p * g.lda, g.bf16Inputs);
        store(g.biasGradA, i, sum);
      }
    if (g.biasGradB)
      for (size_t j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (size_t p = 0; p < k; ++p)
          sum += element(B, g.transB ? j + p * g.ldb : p + j * g.ldb, g.bf16Inputs);
        store(g.biasGradB, j, sum);
      }
    for (size_t j = 0; j < n; ++j) {
      const float *column = product.data() + j * m;
      for (size_t i = 0; i < m; ++i) {
        size_t at = i + j * g.ldc;
        float c = g.beta == 0.0f ? 0.0f : element(source, at, g.bf16Output);
        float value = g.beta == 0.0f ? g.alpha * column[i] : g.alpha * column[i] + g.beta * c;
        if (g.bias)
          value += element(g.bias, i, g.bf16Output);
        if (g.bf16Output)
          reinterpret_cast<uint16_t *>(C)[at] = narrow(value);
        else
          reinterpret_cast<float *>(C)[at] = value;
      }
    }
  }
  return CUDA_SUCCESS;
}

// The rounding a compute type asks for (cublasGemmEx), or nullopt for one
// the emulator does not implement.
std::optional<InputRounding> roundingOf(cublasComputeType_t type, cublasMath_t math) {
  switch (type) {
  case CUBLAS_COMPUTE_32F:
    // As in cuBLAS, the handle's TF32 math mode applies to CUBLAS_COMPUTE_32F.
    return math == CUBLAS_TF32_TENSOR_OP_MATH ? InputRounding::Tf32 : InputRounding::None;
  case CUBLAS_COMPUTE_32F_PEDANTIC: return InputRounding::None;
  case CUBLAS_COMPUTE_32F_FAST_TF32: return InputRounding::Tf32;
  case CUBLAS_COMPUTE_32F_FAST_16BF: return InputRounding::Bf16;
  default: return std::nullopt;
  }
}

} // namespace

float roundInput(float x, InputRounding rounding) {
  if (rounding == InputRounding::None || !std::isfinite(x))
    return x;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (rounding == InputRounding::Tf32)
    bits = (bits + 0x1000u) & 0xffffe000u; // ties away from zero
  else
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u; // ties to even
  std::memcpy(&x, &bits, 4);
  return x;
}

cublasStatus_t enqueueGemm(CUstream stream, const GemmShape &g, const char *call) {
  if (!validShape(g)) {
    report(fmt::format("{}: invalid arguments (m {}, n {}, k {}, lda {}, ldb {}, ldc {})", call,
                       g.m, g.n, g.k, g.lda, g.ldb, g.ldc));
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (g.m == 0 || g.n == 0 || g.batches == 0)
    return CUBLAS_STATUS_SUCCESS;
  // Checked at the call (real cuBLAS would fault on the device instead).
  if (!matricesInside(g))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::string what = fmt::format("{} (m {}, n {}, k {}, batches {})", call, g.m, g.n, g.k,
                                 g.batches);
  CUresult result = enqueue(stream, {what, [g]() { return runGemm(g); }});
  return result == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t enqueueGemmArrays(CUstream stream, const GemmShape &g, const void *const *A,
                                 const void *const *B, void *const *C, const char *call) {
  if (!validShape(g)) {
    report(fmt::format("{}: invalid arguments (m {}, n {}, k {}, lda {}, ldb {}, ldc {})", call,
                       g.m, g.n, g.k, g.lda, g.ldb, g.ldc));
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (g.m == 0 || g.n == 0 || g.batches == 0)
    return CUBLAS_STATUS_SUCCESS;
  const uint64_t bytes = uint64_t(g.batches) * sizeof(void *);
  if (!A || !B || !C || !insideAllocation(uint64_t(A), bytes, fmt::format("{} Aarray", call)) ||
      !insideAllocation(uint64_t(B), bytes, fmt::format("{} Barray", call)) ||
      !insideAllocation(uint64_t(C), bytes, fmt::format("{} Carray", call)))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::string what = fmt::format("{} (m {}, n {}, k {}, batches {})", call, g.m, g.n, g.k,
                                 g.batches);
  CUresult result = enqueue(stream, {what, [g, A, B, C]() {
                                       for (int i = 0; i < g.batches; ++i) {
                                         GemmShape one = g;
                                         one.batches = 1;
                                         one.strideA = one.strideB = one.strideC = 0;
                                         one.A = static_cast<const float *>(A[i]);
                                         one.B = static_cast<const float *>(B[i]);
                                         one.C = static_cast<float *>(C[i]);
                                         if (!matricesInside(one))
                                           return CUDA_ERROR_ILLEGAL_ADDRESS;
                                         runGemm(one);
                                       }
                                       return CUDA_SUCCESS;
                                     }});
  return result == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

} // namespace stringrt::emulator

using namespace stringrt::emulator;

STRINGRT_EMU_EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  if (!handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  auto *made = new Handle;
  handles().insert(made);
  *handle = reinterpret_cast<cublasHandle_t>(made);
  return CUBLAS_STATUS_SUCCESS;
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  Handle *handle = handleOf(h);
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  handles().erase(handle);
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t stream) {
  Handle *handle = handleOf(h);
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = reinterpret_cast<CUstream>(stream);
  return CUBLAS_STATUS_SUCCESS;
}

// The emulated GEMMs need no workspace; the pointer must be device memory.
STRINGRT_EMU_EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *workspace,
                                                         size_t bytes) {
  Handle *handle = handleOf(h);
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes && !insideAllocation(uint64_t(workspace), bytes, "cublasSetWorkspace"))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
  Handle *handle = handleOf(h);
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH &&
      mode != CUBLAS_PEDANTIC_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

STRINGRT_EMU_EXPORT const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  default: return "unknown cuBLAS status";
  }
}

// The Ex GEMMs on f32 data (CUDA_R_32F for A, B and C; alpha and beta are
// floats for the 32F compute types); other types are not emulated
// (CUBLAS_STATUS_NOT_SUPPORTED, reported).
static cublasStatus_t gemmEx(const char *call, cublasHandle_t h, cublasOperation_t transa,
                             cublasOperation_t transb, int m, int n, int k, const void *alpha,
                             const void *A, cudaDataType Atype, int lda, long long strideA,
                             const void *B, cudaDataType Btype, int ldb, long long strideB,
                             const void *beta, void *C, cudaDataType Ctype, int ldc,
                             long long strideC, int batchCount, cublasComputeType_t computeType,
                             cublasGemmAlgo_t algo) {
  Handle *handle = handleOf(h);
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta || (transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::optional<InputRounding> rounding = roundingOf(computeType, handle->math);
  // f32 A, B, C; or bf16 A and B (one matrix, not batched) with a bf16 or
  // f32 C and CUBLAS_COMPUTE_32F, as cuBLAS's table of Ex type combinations has.
  bool f32 = Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F;
  bool bf16 = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF &&
              (Ctype == CUDA_R_16BF || Ctype == CUDA_R_32F) &&
              computeType == CUBLAS_COMPUTE_32F && batchCount == 1;
  if (!(f32 || bf16) || !rounding ||
      (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)) {
    report(fmt::format("{}: only f32 matrices with a 32F compute type, or bf16 A and B (C bf16 "
                       "or f32) with CUBLAS_COMPUTE_32F, and the default algorithm are emulated "
                       "(types {}, {}, {}, compute type {}, algo {})",
                       call, int(Atype), int(Btype), int(Ctype), int(computeType), int(algo)));
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (bf16)
    rounding = InputRounding::None; // bf16 is exact in f32
  GemmShape g{transa == CUBLAS_OP_T, transb == CUBLAS_OP_T, m, n, k,
              *static_cast<const float *>(alpha), *static_cast<const float *>(beta),
              static_cast<const float *>(A), lda, strideA, static_cast<const float *>(B), ldb,
              strideB, static_cast<float *>(C), ldc, strideC, batchCount, *rounding};
  g.bf16Inputs = bf16;
  g.bf16Output = Ctype == CUDA_R_16BF;
  return enqueueGemm(handle->stream, g, call);
}

// Arrays of pointers (cuBLAS's grouped form, one shape): f32 A, B, C with
// a 32F compute type, or bf16 A and B with a bf16 or f32 C and
// CUBLAS_COMPUTE_32F, as cublasGemmEx; the default algorithm.
STRINGRT_EMU_EXPORT cublasStatus_t cublasGemmBatchedEx(
    cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void *alpha, const void *const Aarray[], cudaDataType Atype, int lda,
    const void *const Barray[], cudaDataType Btype, int ldb, const void *beta,
    void *const Carray[], cudaDataType Ctype, int ldc, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  const char *call = "cublasGemmBatchedEx";
  Handle *handle = handleOf(h);
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta || (transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::optional<InputRounding> rounding = roundingOf(computeType, handle->math);
  bool f32 = Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F;
  bool bf16 = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF &&
              (Ctype == CUDA_R_16BF || Ctype == CUDA_R_32F) && computeType == CUBLAS_COMPUTE_32F;
  if (!(f32 || bf16) || !rounding ||
      (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)) {
    report(fmt::format("{}: only f32 matrices with a 32F compute type, or bf16 A and B (C bf16 "
                       "or f32) with CUBLAS_COMPUTE_32F, and the default algorithm are emulated "
                       "(types {}, {}, {}, compute type {}, algo {})",
                       call, int(Atype), int(Btype), int(Ctype), int(computeType), int(algo)));
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  GemmShape g{transa == CUBLAS_OP_T, transb == CUBLAS_OP_T, m, n, k,
              *static_cast<const float *>(alpha), *static_cast<const float *>(beta),
              nullptr, lda, 0, nullptr, ldb, 0, nullptr, ldc, 0, batchCount,
              bf16 ? InputRounding::None : *rounding}; // bf16 is exact in f32
  g.bf16Inputs = bf16;
  g.bf16Output = Ctype == CUDA_R_16BF;
  return enqueueGemmArrays(handle->stream, g, Aarray, Barray, Carray, call);
}

// The f32 GEMMs are the Ex GEMMs on f32 data with CUBLAS_COMPUTE_32F.
STRINGRT_EMU_EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t transa,
                                                  cublasOperation_t transb, int m, int n, int k,
                                                  const float *alpha, const float *A, int lda,
                                                  const float *B, int ldb, const float *beta,
                                                  float *C, int ldc) {
  return gemmEx("cublasSgemm", h, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B,
                CUDA_R_32F, ldb, 0, beta, C, CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT);
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasSgemmStridedBatched(
    cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const float *alpha, const float *A, int lda, long long int strideA, const float *B, int ldb,
    long long int strideB, const float *beta, float *C, int ldc, long long int strideC,
    int batchCount) {
  return gemmEx("cublasSgemmStridedBatched", h, transa, transb, m, n, k, alpha, A, CUDA_R_32F,
                lda, strideA, B, CUDA_R_32F, ldb, strideB, beta, C, CUDA_R_32F, ldc, strideC,
                batchCount, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t transa,
                                                cublasOperation_t transb, int m, int n, int k,
                                                const void *alpha, const void *A,
                                                cudaDataType Atype, int lda, const void *B,
                                                cudaDataType Btype, int ldb, const void *beta,
                                                void *C, cudaDataType Ctype, int ldc,
                                                cublasComputeType_t computeType,
                                                cublasGemmAlgo_t algo) {
  return gemmEx("cublasGemmEx", h, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype,
                ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType, algo);
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType Atype, int lda, long long strideA,
    const void *B, cudaDataType Btype, int ldb, long long strideB, const void *beta, void *C,
    cudaDataType Ctype, int ldc, long long strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return gemmEx("cublasGemmStridedBatchedEx", h, transa, transb, m, n, k, alpha, A, Atype, lda,
                strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,
                computeType, algo);
}

// y += alpha x on f32 vectors with unit strides (the only ones the runtime
// passes; others are reported and refused), enqueued on the handle's stream.
// Each element is one fused multiply-add, as cuBLAS computes it on the GPU.
STRINGRT_EMU_EXPORT cublasStatus_t cublasSaxpy_v2(cublasHandle_t h, int n, const float *alpha,
                                                  const float *x, int incx, float *y, int incy) {
  Handle *handle = handleOf(h);
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || n < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (n == 0)
    return CUBLAS_STATUS_SUCCESS;
  if (incx != 1 || incy != 1) {
    report(fmt::format("cublasSaxpy: only unit strides are emulated (incx {}, incy {})", incx,
                       incy));
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const uint64_t bytes = uint64_t(n) * 4;
  if (!insideAllocation(uint64_t(x), bytes, "cublasSaxpy vector x") ||
      !insideAllocation(uint64_t(y), bytes, "cublasSaxpy vector y"))
    return CUBLAS_STATUS_INVALID_VALUE;
  const float a = *alpha;
  CUresult result = enqueue(handle->stream, {fmt::format("cublasSaxpy (n {})", n), [=]() {
                                               for (int i = 0; i < n; ++i)
                                                 y[i] = std::fma(a, x[i], y[i]);
                                               return CUDA_SUCCESS;
                                             }});
  return result == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
