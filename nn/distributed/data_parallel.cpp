// DistributedDataParallel (data_parallel.h): broadcast at start, bucketed gradient averaging.
#include "nn/distributed/data_parallel.h"

#include <chrono>

#include "autograd/graph.h"
#include "core/error.h"

namespace ember::distributed {

struct DistributedDataParallel::Bucket {
  std::vector<size_t> params;   // indices into params_
  std::vector<int64_t> offsets;  // of each parameter in `flat`
  Tensor flat;                   // the gradients, packed
  size_t ready = 0;              // gradients complete this pass
  std::unique_ptr<Work> work;    // the all-reduce in flight
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, std::shared_ptr<ProcessGroup> group,
                                                 DdpOptions options)
    : Module("DistributedDataParallel"), options_(options) {
  EMBER_CHECK(module != nullptr, "DistributedDataParallel: expected a module, got null");
  EMBER_CHECK(options.bucket_cap_mib > 0, "DistributedDataParallel: bucket_cap_mib must be positive, got ",
              options.bucket_cap_mib);
  module_ = register_module("module", std::move(module));
  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) params_.emplace_back(name, p);
  const Device device = params_.empty() ? Device::cpu() : params_.front().second.device();
  group_ = group ? std::move(group) : init_process_group(device);

  {  // every replica starts from rank 0's state
    autograd::NoGradGuard no_grad;
    for (auto& [name, p] : module_->named_parameters()) group_->broadcast(p, 0);
    for (auto& [name, b] : module_->named_buffers()) group_->broadcast(b, 0);
  }
  build_buckets(options.bucket_cap_mib);
  ready_.assign(params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i)
    hooks_.push_back(autograd::add_post_accumulate_hook(params_[i].second, [this, i] { gradient_ready(i); }));
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::build_buckets(double cap_mib) {
  const double cap_bytes = cap_mib * 1024 * 1024;
  bucket_of_.assign(params_.size(), 0);
  double bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k].second;
    const bool fits = !buckets_.empty() &&
                      params_[buckets_.back().params.front()].second.dtype() == p.dtype() &&
                      bytes + double(p.nbytes()) <= cap_bytes;
    if (!fits) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + params_[b.params.back()].second.numel());
    b.params.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes += double(p.nbytes());
  }
  for (Bucket& b : buckets_) {
    const Tensor& last = params_[b.params.back()].second;
    b.flat = Tensor::empty({b.offsets.back() + last.numel()}, last.options());
  }
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_layout() const {
  std::vector<std::vector<std::string>> layout;
  for (const Bucket& b : buckets_) {
    layout.emplace_back();
    for (size_t k : b.params) layout.back().push_back(params_[k].first);
  }
  return layout;
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  EMBER_CHECK(!pass_active_, "DistributedDataParallel: the previous backward pass did not finish synchronising "
              "gradients (it threw); the ranks are out of step and the job cannot continue");
  if (options_.broadcast_buffers && is_training()) sync_buffers();
  return (*module_)(x);
}

void DistributedDataParallel::sync_buffers() {
  if (group_->size() == 1) return;
  autograd::NoGradGuard no_grad;
  for (auto& [name, b] : module_->named_buffers()) group_->broadcast(b, 0);
}

void DistributedDataParallel::gradient_ready(size_t param) {
  if (no_sync_) return;
  if (!pass_active_) {
    pass_active_ = true;
    autograd::queue_callback([this] { finish_pass(); });
  }
  if (ready_[param]) return;
  ready_[param] = 1;
  ++buckets_[bucket_of_[param]].ready;
  launch_ready_buckets();
  for (size_t b = 0; b < next_launch_; ++b) buckets_[b].work->test();  // Note [Overlap on MPI]
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].ready == buckets_[next_launch_].params.size())
    launch(buckets_[next_launch_++]);
}

void DistributedDataParallel::launch(Bucket& bucket) {
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    const Tensor& p = params_[bucket.params[j]].second;
    Tensor slot = bucket.flat.narrow(0, bucket.offsets[j], p.numel()).view(p.shape());
    const Tensor g = p.grad();
    if (g.defined()) slot.copy_(g);
    else slot.zero_();  // not reached by this rank's graph (Note [Gradient buckets])
  }
  bucket.work = group_->all_reduce_async(bucket.flat, ReduceOp::Average);
}

void DistributedDataParallel::finish_pass() {
  const auto start = std::chrono::steady_clock::now();
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
  for (Bucket& bucket : buckets_) {
    bucket.work->wait();
    bucket.work.reset();
    for (size_t j = 0; j < bucket.params.size(); ++j) {
      const Tensor& p = params_[bucket.params[j]].second;
      Tensor average = bucket.flat.narrow(0, bucket.offsets[j], p.numel()).view(p.shape());
      Tensor g = p.grad();
      if (g.defined() && g.is_contiguous()) g.copy_(average);
      else p.set_grad(average.clone());
    }
    bucket.ready = 0;
  }
  std::fill(ready_.begin(), ready_.end(), 0);
  next_launch_ = 0;
  pass_active_ = false;
  ++stats_.synchronised_passes;
  stats_.exposed_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ember::distributed
