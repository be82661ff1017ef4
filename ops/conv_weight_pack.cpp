#include "ops/conv_weight_pack.h"

namespace ember {

std::shared_ptr<const Conv2dWeightPack::Panels> Conv2dWeightPack::panels_for(
    const Tensor& w, int64_t groups, const std::function<std::shared_ptr<const Panels>()>& build) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (panels_ && groups_ == groups && stamp_.matches(w)) return panels_;
  panels_ = build();
  stamp_ = TensorStamp(w);
  groups_ = groups;
  ++builds_;
  return panels_;
}

int64_t Conv2dWeightPack::builds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return builds_;
}

}  // namespace ember
