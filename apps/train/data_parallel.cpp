// DataParallelRun (data_parallel.h).
#include "apps/train/data_parallel.h"

#include "core/error.h"
#include "cuda/runtime.h"
#include "datasets/batch_shard_sampler.h"
#include "datasets/distributed_sampler.h"
#include "nn/distributed/data_parallel.h"
#include "nn/distributed/global_batch_loss.h"
#include "ops/ops.h"

namespace ember::apps {

std::shared_ptr<distributed::ProcessGroup> process_group_from_environment(Device device) {
  if (distributed::launched_world_size() <= 1) return nullptr;
  return distributed::init_process_group(device);
}

Device training_device(const std::string& device) {
  if (distributed::launched_world_size() <= 1) return parse_device(device);
  return parse_device(
      distributed::device_for_local_rank(device, distributed::launched_local_rank(), cuda::device_count()));
}

std::shared_ptr<const Sampler> DataParallelRun::sampler(int64_t num_samples) const {
  if (!group_) return nullptr;
  return std::make_shared<DistributedSampler>(num_samples,
                                              DistributedSamplerOptions{.rank = rank(), .world_size = world_size()});
}

std::shared_ptr<const Sampler> DataParallelRun::batch_sampler(std::shared_ptr<const Sampler> global,
                                                             int64_t batch_size) const {
  if (!group_) return global;
  return std::make_shared<BatchShardSampler>(
      std::move(global), BatchShardOptions{.rank = rank(), .world_size = world_size(), .batch_size = batch_size});
}

Tensor DataParallelRun::loss_over_ranks(const Tensor& embeddings, const Tensor& labels,
                                        const std::function<Tensor(const Tensor&, const Tensor&)>& loss) const {
  if (!group_) return loss(embeddings, labels);
  return distributed::global_batch_loss(group_, embeddings, labels, loss);
}

Tensor DataParallelRun::gather_rows(const Tensor& local) const {
  if (!group_) return local;
  return group_->all_gather(local.contiguous());
}

std::shared_ptr<Module> DataParallelRun::replicate(std::shared_ptr<Module> model) const {
  if (!group_) return model;
  return std::make_shared<distributed::DistributedDataParallel>(std::move(model), group_);
}

std::pair<int64_t, int64_t> DataParallelRun::shard_range(int64_t n) const {
  const int64_t r = rank(), size = world_size(), base = n / size, extra = n % size;
  const int64_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

namespace {

// The samples [begin, end) in order, every epoch.
class RangeSampler : public Sampler {
 public:
  RangeSampler(int64_t begin, int64_t end) : begin_(begin), end_(end) {}
  int64_t length() const override { return end_ - begin_; }
  std::vector<int64_t> draw_order(Generator&) const override {
    std::vector<int64_t> order(size_t(end_ - begin_));
    for (int64_t i = begin_; i < end_; ++i) order[size_t(i - begin_)] = i;
    return order;
  }

 private:
  int64_t begin_, end_;
};

}  // namespace

std::shared_ptr<const Sampler> DataParallelRun::evaluation_sampler(int64_t num_samples) const {
  if (!group_) return nullptr;
  const auto [begin, end] = shard_range(num_samples);
  return std::make_shared<RangeSampler>(begin, end);
}

void DataParallelRun::sync_buffers(Module& trained) const {
  if (auto* ddp = dynamic_cast<distributed::DistributedDataParallel*>(&trained)) ddp->sync_buffers();
}

void DataParallelRun::sum(std::vector<double>& values) const {
  if (!group_ || values.empty()) return;
  Tensor t = tensor<double>(values);
  if (!group_->device().is_cpu()) t = t.to(group_->device());
  group_->all_reduce(t, distributed::ReduceOp::Sum);
  const Tensor host = t.to(Device::cpu());
  for (size_t i = 0; i < values.size(); ++i) values[i] = host.data<double>()[i];
}

void DataParallelRun::after_outputs(const std::function<void()>& write) const {
  if (leads()) write();
  if (group_) group_->barrier();
}

std::ostream& DataParallelRun::silent() const {
  static std::ostream discard(nullptr);  // no buffer: every write is dropped
  return discard;
}

}  // namespace ember::apps
