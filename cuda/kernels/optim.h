// The CUDA optimizer steps, with the CPU kernels' signatures and contracts (ops/cpu/kernels.h).
#pragma once

#include "core/tensor.h"
#include "ops/kernels.h"
#include "ops/optim_rules.h"

namespace ember::cuda {

void sgd_step(const SgdStep& step, const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer);
void adam_step(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq);

// Binds both to sgd_step_kernel / adam_step_kernel; called by cuda::init().
void register_optim_kernels();

}  // namespace ember::cuda
