// A loss Module for the tests of module losses (trained parameters, checkpointed state), until
// ArcFace and ProxyAnchor land: normalised-softmax over learned class proxies,
// cross_entropy(16 * normalize(emb) @ normalize(proxies)^T, labels).
//
//   auto loss = std::make_shared<ToyProxyLoss>(10, 16, nullptr);
//   Tensor l = (*loss)(emb, labels);   // loss->parameters() == {proxies}
#pragma once

#include "ember.h"

namespace ember::test {

class ToyProxyLoss : public Module {
 public:
  ToyProxyLoss(int64_t classes, int64_t dim, Generator* gen) : Module("ToyProxyLoss") {
    proxies_ = register_parameter("proxies", randn({classes, dim}, {}, gen));
  }
  Tensor forward(const Tensor&) override { EMBER_FAIL("ToyProxyLoss: call it with (embeddings, labels)"); }
  Tensor operator()(const Tensor& embeddings, const Tensor& labels) {
    const Tensor logits = matmul(normalize_rows(embeddings), transpose(normalize_rows(proxies_), 0, 1)) * 16.0;
    return cross_entropy(logits, labels);
  }

 private:
  Tensor proxies_;
};

}  // namespace ember::test
