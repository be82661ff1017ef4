// ember: one include for programs that embed the library.
//
//   #include <ember/ember.h>
//   using namespace ember;
//   Tensor w = randn({3, 2}).requires_grad_();
//   Tensor loss = relu(matmul(ones({4, 3}), w)).sum();
//   loss.backward();
//   std::cout << w.grad() << "\n";
#pragma once

#include "autograd/engine.h"
#include "autograd/graph.h"
#include "autograd/gradcheck.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "datasets/data_loader.h"
#include "datasets/image_folder.h"
#include "datasets/png_write.h"
#include "datasets/tensor_dataset.h"
#include "losses/losses.h"
#include "nn/nn.h"
#include "nn/distributed/distributed.h"
#include "ops/ops.h"
