#include "losses/batch_hard_miner.h"

#include "autograd/graph.h"
#include "ops/reduced_precision.h"
#include "losses/metric_common.h"
#include "ops/kernels.h"

namespace ember {

Triplets batch_hard_miner(const Tensor& embeddings, const Tensor& labels) {
  constexpr const char* kOp = "batch_hard_miner";
  if (is_reduced_float(embeddings.dtype())) return batch_hard_miner(widened(embeddings), labels);  // indices only
  check_embeddings(kOp, embeddings, labels);
  autograd::NoGradGuard no_grad;  // mining picks indices: nothing to differentiate
  const Tensor e = normalize_rows(embeddings);
  const int64_t B = e.size(0);
  const Tensor hardest = Tensor::empty({B, 2}, {.dtype = DType::i64, .device = e.device()});
  batch_hard_mine_kernel(e.device(), pair_tiles(), e, labels.contiguous(), hardest);
  // Note [Mined count on the host]: how many anchors survive decides the output's shape, so the
  // (B, 2) choices are read on the host (one copy and, on cuda, one synchronisation) and the
  // kept anchors compacted there, in increasing order.
  const Tensor h = hardest.cpu();
  const int64_t* best = h.data<int64_t>();
  int64_t kept = 0;
  for (int64_t i = 0; i < B; ++i) kept += best[2 * i] >= 0 && best[2 * i + 1] >= 0;
  const TensorOptions i64{.dtype = DType::i64};
  Triplets t{Tensor::empty({kept}, i64), Tensor::empty({kept}, i64), Tensor::empty({kept}, i64)};
  int64_t* a = t.anchor.data<int64_t>();
  int64_t* p = t.positive.data<int64_t>();
  int64_t* n = t.negative.data<int64_t>();
  for (int64_t i = 0, k = 0; i < B; ++i)
    if (best[2 * i] >= 0 && best[2 * i + 1] >= 0) a[k] = i, p[k] = best[2 * i], n[k] = best[2 * i + 1], ++k;
  return {t.anchor.to(e.device()), t.positive.to(e.device()), t.negative.to(e.device())};
}

}  // namespace ember
