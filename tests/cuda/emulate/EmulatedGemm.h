// The emulator's GEMM (CublasApi.cpp), shared by its cuBLAS and cuBLASLt
// entries (CublasLtApi.cpp): cuBLAS's column-major semantics on f32 data,
// products of inputs rounded as the compute type says, f32 FMA in k order.
#pragma once

#include <cublas_v2.h>
#include <cuda.h>

namespace stringrt::emulator {

// How the tensor cores read f32 inputs: unchanged (CUBLAS_COMPUTE_32F),
// TF32 (10-bit mantissa, round to nearest, ties away) or bf16 (8-bit
// mantissa, round to nearest even). NaN and infinities are kept.
enum class InputRounding { None, Tf32, Bf16 };
float roundInput(float x, InputRounding rounding);

// C = alpha op(A) op(B) + beta C (or beta source, when set; + bias[i] on
// row i, when bias is set),
// `batches` times, matrix i at base + i * stride.
struct GemmShape {
  bool transA, transB;
  int m, n, k;
  float alpha, beta;
  const float *A;
  int lda;
  long long strideA;
  const float *B;
  int ldb;
  long long strideB;
  float *C;
  int ldc;
  long long strideC;
  int batches;
  InputRounding rounding;
  const float *bias = nullptr; // m floats (cuBLASLt's CUBLASLT_EPILOGUE_BIAS)
  // cuBLASLt's bias-gradient epilogues, written (C's type, one batch): the
  // sums over k of op(A) (m elements, CUBLASLT_EPILOGUE_BGRADA) or of op(B)
  // (n elements, CUBLASLT_EPILOGUE_BGRADB), each an f32 sum in k order from
  // +0 of the stored elements (not rounded as the compute type rounds the
  // product's inputs).
  float *biasGradA = nullptr, *biasGradB = nullptr;
  // What beta scales when it is not C (cuBLASLt's C apart from its D, then
  // written to C): the layout of C, one batch.
  const float *source = nullptr;
  // bf16 storage (CUDA_R_16BF): A and B, and C (with the bias). The
  // pointers above then address bf16 elements (2 bytes; leading
  // dimensions and strides in elements); bf16 values widen exactly to f32,
  // the products sum in f32, and a bf16 C is rounded once, to nearest even.
  bool bf16Inputs = false, bf16Output = false;
};

// product[j * m + i] = the f32 FMA chain over p = 0 .. k - 1, in that order
// and from +0, of a[p * m + i] * b[j * k + p] (GemmProduct.cpp): the same
// bits as std::fma one element at a time.
void gemmProduct(const float *a, const float *b, float *product, int m, int n, int k);

// Checks the arguments as cuBLAS does and that every matrix (and the bias)
// lies inside one allocation, then queues the GEMM on `stream`. `call` names
// it in reports.
cublasStatus_t enqueueGemm(CUstream stream, const GemmShape &g, const char *call);

// cublasGemmBatchedEx: `g` (one batch each, its A, B, C unset) for each of
// g.batches triples of pointers read, when the call runs on the stream,
// from the device arrays A, B and C (as cuBLAS reads them on the GPU; so a
// replayed graph sees the arrays' contents of its replay). The arrays must
// lie inside allocations at the call; each matrix they name when it runs
// (else the stream's operation fails, reported).
cublasStatus_t enqueueGemmArrays(CUstream stream, const GemmShape &g, const void *const *A,
                                 const void *const *B, void *const *C, const char *call);

} // namespace stringrt::emulator
