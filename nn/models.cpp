#include "nn/models.h"

#include "core/error.h"
#include "nn/layers.h"

namespace ember {

std::shared_ptr<Sequential> mlp(const std::vector<int64_t>& sizes, Generator* gen) {
  EMBER_CHECK(sizes.size() >= 2, "mlp: expected at least two sizes (input and output), got ", sizes.size());
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Flatten>());
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    net->push_back(std::make_shared<Linear>(sizes[i], sizes[i + 1], true, gen));
    if (i + 2 < sizes.size()) net->push_back(std::make_shared<ReLU>());
  }
  return net;
}

}  // namespace ember
