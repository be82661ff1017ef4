// ArcFace (additive angular margin), as pytorch-metric-learning 2.8.1's ArcFaceLoss with its
// default cosine similarity and mean reduction: a Module that owns the class weights W.
//
//   ArcFaceLoss arcface(num_classes, embedding_size);       // W (D, C) ~ N(0, 1), as PML
//   Tensor loss = arcface(emb, labels);                      // emb (B, D), labels (B) i64
//   Adam opt(concat(model.parameters(), arcface.parameters()));
//   arcface.load_state_dict(load_tensors("arcface.safetensors"));   // PML's "W", (D, C)
//   Tensor l2 = arcface_loss(emb, labels, W, {.margin_degrees = 20, .scale = 30});  // functional
//
// Embeddings and W's columns are L2-normalised; c_ic = e_i . w_c. The target class's cosine
// becomes cos(theta + m) with theta = acos(clamp(c, -1, 1)) while theta <= pi - m, and
// cos(theta) - m sin(m) beyond (m = margin_degrees in radians); the loss is the mean over rows
// of the cross-entropy of scale * logits (0 with zero gradients for an empty batch). The B x C
// cosines are streamed in tiles (ops/pair_tiles.h), never held; one autograd node returns the
// gradients of both the embeddings and W.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace ember {

struct ArcFaceOptions {
  double margin_degrees = 28.6;
  double scale = 64;
};

// embeddings (B, D), labels (B) i64 in [0, C), W (D, C) of the embeddings' dtype and device.
Tensor arcface_loss(const Tensor& embeddings, const Tensor& labels, const Tensor& W, ArcFaceOptions options = {});

class ArcFaceLoss : public Module {
 public:
  // Parameter "W" of shape (embedding_size, num_classes), drawn from N(0, 1) as PML's default
  // weight_init_func (torch.nn.init.normal_) does.
  ArcFaceLoss(int64_t num_classes, int64_t embedding_size, ArcFaceOptions options = {}, Generator* gen = nullptr);
  // W is cast to the embeddings' dtype (PML's cast_types; the cast is recorded, so the f32
  // parameter still gets its gradient).
  Tensor operator()(const Tensor& embeddings, const Tensor& labels);
  // A loss needs labels: an Error pointing at operator()(embeddings, labels).
  Tensor forward(const Tensor& x) override;

  Tensor& W() { return W_; }
  int64_t num_classes() const { return num_classes_; }
  const ArcFaceOptions& options() const { return options_; }

 private:
  int64_t num_classes_;
  ArcFaceOptions options_;
  Tensor W_;
};

}  // namespace ember
