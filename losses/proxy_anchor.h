// Proxy Anchor, as pytorch-metric-learning 2.8.1's ProxyAnchorLoss with its default cosine
// similarity and DivisorReducer: a Module that owns one proxy per class.
//
//   ProxyAnchorLoss pa(num_classes, embedding_size);        // proxies (C, D), kaiming-normal
//   Tensor loss = pa(emb, labels);                           // emb (B, D), labels (B) i64
//   pa.load_state_dict(load_tensors("proxies.safetensors")); // PML's "proxies", (C, D)
//   Tensor l2 = proxy_anchor_loss(emb, labels, proxies, {.margin = 0.2, .alpha = 16});  // functional
//
// Embeddings and proxies are L2-normalised; s_ic = e_i . p_c. Per class c (PML's logsumexp with
// add_one):
//   pos_c = log(1 + sum over i with y_i == c of exp(alpha (margin - s_ic)))
//   neg_c = log(1 + sum over i with y_i != c of exp(alpha (s_ic + margin)))
// loss = sum_c pos_c / (number of classes present in the batch) + sum_c neg_c / C; an empty batch
// gives 0 and zero gradients. The C x B cosines are streamed in tiles (ops/pair_tiles.h) with
// per-class running sums; one autograd node returns the gradients of the embeddings and proxies.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace ember {

struct ProxyAnchorOptions {
  double margin = 0.1;
  double alpha = 32;
};

// embeddings (B, D), labels (B) i64 in [0, C), proxies (C, D) of the embeddings' dtype and device.
Tensor proxy_anchor_loss(const Tensor& embeddings, const Tensor& labels, const Tensor& proxies,
                         ProxyAnchorOptions options = {});

class ProxyAnchorLoss : public Module {
 public:
  // Parameter "proxies" of shape (num_classes, embedding_size), drawn as PML does:
  // torch.nn.init.kaiming_normal_(proxies, mode="fan_out"), i.e. N(0, 2 / num_classes).
  ProxyAnchorLoss(int64_t num_classes, int64_t embedding_size, ProxyAnchorOptions options = {},
                  Generator* gen = nullptr);
  // The proxies are cast to the embeddings' dtype (PML's cast_types; recorded).
  Tensor operator()(const Tensor& embeddings, const Tensor& labels);
  // A loss needs labels: an Error pointing at operator()(embeddings, labels).
  Tensor forward(const Tensor& x) override;

  Tensor& proxies() { return proxies_; }
  int64_t num_classes() const { return num_classes_; }
  const ProxyAnchorOptions& options() const { return options_; }

 private:
  int64_t num_classes_;
  ProxyAnchorOptions options_;
  Tensor proxies_;
};

}  // namespace ember
