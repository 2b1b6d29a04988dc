// cuBLASLt, opened with dlopen like cuBLAS (Blas.h): the GEMMs whose
// epilogue adds the bias (CUBLASLT_EPILOGUE_BIAS, Gemm::runWithBias).
// STRINGRT_CUBLASLT names the library to open instead of
// libcublasLt.so.<major> (then libcublasLt.so): the emulator's, in the tests.
// A missing library is not an error: Gemm::runWithBias declines and the
// caller adds the bias with a kernel.
#pragma once

#include <cublasLt.h>

#include <string>

namespace stringrt::cuda::blaslt {

// The entry points used, with cublasLt.h's prototypes.
struct Api {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtDestroy) destroy;
  decltype(&::cublasLtMatmulDescCreate) matmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) matmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) matmulDescSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) matrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) matrixLayoutDestroy;
  decltype(&::cublasLtMatmulPreferenceCreate) preferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) preferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preferenceSetAttribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algoGetHeuristic;
  decltype(&::cublasLtMatmul) matmul;
  decltype(&::cublasLtMatmulAlgoConfigGetAttribute) algoConfigGetAttribute;
  decltype(&::cublasLtGetStatusString) getStatusString;
};

// The API, or nullptr with `why` set (library or symbol missing). Loaded
// once per process.
const Api *api(std::string *why = nullptr);

} // namespace stringrt::cuda::blaslt
