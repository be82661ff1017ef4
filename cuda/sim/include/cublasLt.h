// <cublasLt.h> for .cu files compiled by ember-simcc: the handle type and its creation (a
// placeholder; see <cublas_v2.h> here: no compute function is declared).
#pragma once

#include "cublas_v2.h"

struct cublasLtContext {};
typedef struct cublasLtContext* cublasLtHandle_t;

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  static cublasLtContext placeholder;
  *handle = &placeholder;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
