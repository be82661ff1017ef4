// The differentiable all_gather (all_gather.h).
#include "nn/distributed/all_gather.h"

#include "autograd/graph.h"
#include "core/error.h"

namespace ember::distributed {

Tensor all_gather(const std::shared_ptr<ProcessGroup>& group, const Tensor& x) {
  EMBER_CHECK(group != nullptr, "all_gather: expected a process group, got null");
  std::vector<int64_t> sizes;
  Tensor out = group->all_gather(x.contiguous(), &sizes);
  if (autograd::needs_grad(x))
    autograd::record("all_gather", {x}, out, [group, sizes](const Tensor& g) {
      return autograd::TensorList{group->reduce_scatter(g.contiguous(), sizes, ReduceOp::Sum)};
    });
  return out;
}

}  // namespace ember::distributed
