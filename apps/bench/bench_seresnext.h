// `ember bench seresnext`: NVIDIA DeepLearningExamples' benchmark protocol for the ResNet family
// (nn/models/resnet.h) on synthetic data, ember against the same architecture written plainly
// in PyTorch (apps/bench/torch_seresnext.py, built from ember's ResNetConfig so both sides run
// the same network), same threads, alternating rounds (Note [Alternating rounds] in
// bench_kernels.h), each side's best round reported:
//   - training: images per second over --iters SGD steps (momentum 0.875, weight decay,
//     cross-entropy with label smoothing 0.1) after --warmup steps, and the peak memory the
//     steps needed above what the model and the batch already held (ember: the caching
//     allocator's peak; PyTorch: the growth of the peak resident set);
//   - inference (eval mode, no autograd): latency avg / p95 / p99 in ms and img/s at batch
//     1, 2, 4, ... up to --max-infer-batch, over --infer-iters calls after --infer-warmup. A
//     batch whose first call exceeds --infer-cap-s ends the list for both frameworks, and one
//     whose first call in PyTorch exceeds it ends PyTorch's (its later rows read n/a).
//
// On cuda (--device cuda, a GPU) both sides run there: ember's caching allocator and
// torch.cuda.max_memory_allocated give the peaks, a device synchronisation ends each timed
// stretch (the training steps as a whole; each inference call, since latency is per call), and
// PyTorch runs with cuDNN (benchmark mode) and CUDA autocast.
//
//   ember bench seresnext --models se_resnext_cifar,se_resnext50_32x4d --rounds 2
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/device.h"

namespace ember::bench {

struct BenchSeresnextOptions {
  std::vector<std::string> models = {"se_resnext_cifar", "se_resnext50_32x4d"};
  int64_t image_size = 0;      // 0: each model's default (32 for the CIFAR member, 224)
  int64_t train_batch = 0;     // 0: 64 at 32x32, 8 at 224x224 (cuda: 256 and 64)
  int warmup = 2;              // untimed training steps
  int iters = 5;               // timed training steps
  int64_t max_infer_batch = 256;
  int infer_warmup = 2;
  int infer_iters = 10;        // p95/p99 of 10 calls are the slowest call; raise it for real tails
  double infer_cap_s = 2.0;
  int rounds = 2;
  bool with_pytorch = true;
  // Training rows, one per precision: fp32, or the forward under autocast (bf16, fp16) as
  // `ember train --precision` runs it (Note [Mixed-precision steps]); PyTorch uses torch.autocast.
  std::vector<std::string> precisions = {"fp32", "bf16"};
  Device device = Device::cpu();
};

void bench_seresnext(const BenchSeresnextOptions& options, std::ostream& out, std::ostream& log);

}  // namespace ember::bench
