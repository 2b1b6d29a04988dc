// cuBLAS, opened with dlopen like the driver (DriverApi.h), so that programs
// linking the runtime start on machines without the CUDA libraries and
// report "cuBLAS is not available: ..." only when a GEMM is asked for.
// STRINGRT_CUBLAS names the library to open instead of
// libcublas.so.<major> (then libcublas.so): the emulator's, in the tests.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace stringrt::cuda::blas {

// cublasGemmEx and cublasGemmStridedBatchedEx as libcublas exports them
// (cublasComputeType_t compute type; the header also declares C++ overloads
// of the same names taking the legacy cudaDataType, so decltype cannot name
// them).
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                    int, int, const void *, const void *, cudaDataType, int,
                                    const void *, cudaDataType, int, const void *, void *,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedExFn = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
    const void *, cudaDataType, int, long long, const void *, cudaDataType, int, long long,
    const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t,
    cublasGemmAlgo_t);
using GemmBatchedExFn = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
    const void *const[], cudaDataType, int, const void *const[], cudaDataType, int, const void *,
    void *const[], cudaDataType, int, int, cublasComputeType_t, cublasGemmAlgo_t);

// The entry points used, with cublas_api.h's prototypes, by their versioned
// symbols (cublasCreate -> cublasCreate_v2). GEMMs go through the Ex entries:
// f32 data with the compute type naming the arithmetic (CublasGemm.cpp); saxpy
// adds the micro-batches' gradients of an accumulated step (Gemm::axpy).
struct Api {
  decltype(&::cublasCreate_v2) create;
  decltype(&::cublasDestroy_v2) destroy;
  GemmExFn gemmEx;
  GemmStridedBatchedExFn gemmStridedBatchedEx;
  GemmBatchedExFn gemmBatchedEx; // the grouped GEMMs (Gemm::runGrouped)
  decltype(&::cublasSaxpy_v2) saxpy;
  decltype(&::cublasSetStream_v2) setStream;
  decltype(&::cublasSetWorkspace_v2) setWorkspace;
  decltype(&::cublasGetStatusString) getStatusString;
};

// The API, or nullptr with `why` set (library or symbol missing). Loaded
// once per process.
const Api *api(std::string *why = nullptr);
// The API; throws Error("cuBLAS is not available: <why>") when missing.
const Api &require();

} // namespace stringrt::cuda::blas
