// What every metric-learning loss shares: its input checks and PML's normalisation.
//
//   check_embeddings("ntxent_loss", emb, labels);   // (B, D) f32/f64 and (B) i64, one device
//   Tensor e = normalize_rows(emb);                  // rows / max(||row||, 1e-12), differentiable
//   check_class_weights("arcface_loss", "W", W, 0, emb);   // W (D, C): D along dim 0
#pragma once

#include "core/tensor.h"

namespace ember {

// Embeddings (B, D) of a floating dtype and labels (B) of dtype i64 on the same device; an
// Error naming `op`, what was expected and what was given otherwise.
void check_embeddings(const char* op, const Tensor& embeddings, const Tensor& labels);

// torch.nn.functional.normalize(x, p=2, dim=1, eps=1e-12), as PML normalises embeddings:
// each row divided by max(its L2 norm, 1e-12); recorded by autograd.
Tensor normalize_rows(const Tensor& embeddings);

// The class weights of a classifier-style metric loss (ArcFace's W (D, C), ProxyAnchor's
// proxies (C, D)), checked against embeddings that passed check_embeddings: 2-D, the
// embeddings' dtype and device, the embedding size along dim `embedding_dim` and at least one
// class along the other; an Error naming `op`, `name`, what was expected and given otherwise.
void check_class_weights(const char* op, const char* name, const Tensor& weights, int64_t embedding_dim,
                         const Tensor& embeddings);

}  // namespace ember
