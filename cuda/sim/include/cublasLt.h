// <cublasLt.h> for .cu files compiled by ember-simcc: the handle type and its creation, which
// reports that cuBLASLt is unavailable on the SIMT simulator (see <cublas_v2.h> here).
#pragma once

#include "cublas_v2.h"

struct cublasLtContext;
typedef struct cublasLtContext* cublasLtHandle_t;

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = nullptr;
  return ember_sim_cublas_unavailable("cublasLtCreate");
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
