// The global-batch metric loss (global_batch_loss.h).
#include "nn/distributed/global_batch_loss.h"

#include <string>

#include "core/error.h"
#include "nn/distributed/all_gather.h"

namespace ember::distributed {

Tensor global_batch_loss(const std::shared_ptr<ProcessGroup>& group, const Tensor& embeddings,
                         const Tensor& labels, const EmbeddingLoss& loss) {
  EMBER_CHECK(group != nullptr, "global_batch_loss: expected a process group, got null");
  EMBER_CHECK(loss != nullptr, "global_batch_loss: expected a loss function, got an empty one");
  EMBER_CHECK(embeddings.defined() && embeddings.dim() == 2,
              "global_batch_loss: expected embeddings (B, D), got ",
              embeddings.defined() ? shape_str(embeddings.shape()) : std::string("an undefined tensor"));
  EMBER_CHECK(labels.defined() && labels.dim() == 1 && labels.dtype() == DType::i64,
              "global_batch_loss: expected labels (B) i64, got ",
              labels.defined() ? shape_str(labels.shape()) + " " + std::string(dtype_name(labels.dtype()))
                               : std::string("an undefined tensor"));
  EMBER_CHECK(labels.size(0) == embeddings.size(0), "global_batch_loss: expected one label per embedding, got ",
              labels.size(0), " labels for ", embeddings.size(0), " embeddings");
  Tensor all_embeddings = all_gather(group, embeddings);
  Tensor all_labels = group->all_gather(labels.detach().contiguous());
  return loss(all_embeddings, all_labels);
}

}  // namespace ember::distributed
