// Synchronized batch norm (sync_batch_norm.h): the BatchStatsExchange of a process group.
#include "nn/distributed/sync_batch_norm.h"

#include <utility>

#include "nn/distributed/all_gather.h"
#include "nn/norm_layers.h"

namespace ember::distributed {
namespace {

class GroupStatsExchange : public BatchStatsExchange {
 public:
  explicit GroupStatsExchange(std::shared_ptr<ProcessGroup> group) : group_(std::move(group)) {}
  Tensor all_gather(const Tensor& local) override { return distributed::all_gather(group_, local); }

 private:
  std::shared_ptr<ProcessGroup> group_;
};

}  // namespace

int convert_sync_batchnorm(Module& module, std::shared_ptr<ProcessGroup> group) {
  std::shared_ptr<BatchStatsExchange> exchange;
  if (group) exchange = std::make_shared<GroupStatsExchange>(std::move(group));
  int converted = 0;
  for (auto& [name, m] : module.named_modules())
    if (auto* bn = dynamic_cast<BatchNorm*>(m)) {
      bn->synchronise_with(exchange);
      ++converted;
    }
  return converted;
}

}  // namespace ember::distributed
