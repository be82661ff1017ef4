// Batch normalisation and dropout layers; both behave differently in train() and eval().
//
//   auto bn = std::make_shared<BatchNorm2d>(16);   // weight 1, bias 0, running mean 0 / var 1
//   Tensor y = (*bn)(x);                           // training: batch stats, updates the running ones
//   bn->eval();  Tensor z = (*bn)(x);              // evaluation: running stats
#pragma once

#include <memory>
#include <utility>

#include "core/rng.h"
#include "nn/module.h"

namespace ember {

// How a BatchNorm shares its batch statistics with the other replicas of a data-parallel job
// (synchronized batch norm: nn/distributed/sync_batch_norm.h implements it over a process group,
// a layer above this one). A collective: every replica calls it in the same order.
class BatchStatsExchange {
 public:
  virtual ~BatchStatsExchange() = default;
  // local (1, K) on each of R replicas -> (R, K), every replica's row in rank order; differentiable
  // (the backward sums each row's gradient over the replicas and returns this replica's).
  virtual Tensor all_gather(const Tensor& local) = 0;
};

// Over the channels of (N, C) (BatchNorm1d) or (N, C, H, W) (BatchNorm2d) inputs. Buffers:
// running_mean, running_var, num_batches_tracked (as PyTorch, so state dicts line up).
class BatchNorm : public Module {
 public:
  BatchNorm(const char* type_name, int64_t expected_rank, int64_t channels, double eps, double momentum, bool affine);
  Tensor forward(const Tensor& x) override;
  bool fuses_activation() const override { return true; }
  Tensor forward_activated(const Tensor& x, Activation act) override;
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }
  Tensor& running_mean() { return running_mean_; }
  Tensor& running_var() { return running_var_; }
  double eps() const { return eps_; }
  // While training, normalise with the statistics of every replica's batch together (Note
  // [Synchronised batch statistics]); null: this replica's batch alone (the default).
  void synchronise_with(std::shared_ptr<BatchStatsExchange> exchange) { exchange_ = std::move(exchange); }
  bool synchronised() const { return exchange_ != nullptr; }

 private:
  Tensor synchronised_forward(const Tensor& x, Activation act);

  int64_t expected_rank_, channels_;
  double eps_, momentum_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
  std::shared_ptr<BatchStatsExchange> exchange_;
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t channels, double eps = 1e-5, double momentum = 0.1, bool affine = true)
      : BatchNorm("BatchNorm1d", 2, channels, eps, momentum, affine) {}
};

class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1, bool affine = true)
      : BatchNorm("BatchNorm2d", 4, channels, eps, momentum, affine) {}
};

// Zeroes each element with probability p while training (scaling the rest by 1 / (1 - p)).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;

 private:
  double p_;
  Generator* gen_;
};

}  // namespace ember
