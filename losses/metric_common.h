// What every metric-learning loss shares: its input checks and PML's normalisation.
//
//   check_embeddings("ntxent_loss", emb, labels);   // (B, D) f32/f64 and (B) i64, one device
//   Tensor e = normalize_rows(emb);                  // rows / max(||row||, 1e-12), differentiable
#pragma once

#include "core/tensor.h"

namespace ember {

// Embeddings (B, D) of a floating dtype and labels (B) of dtype i64 on the same device; an
// Error naming `op`, what was expected and what was given otherwise.
void check_embeddings(const char* op, const Tensor& embeddings, const Tensor& labels);

// torch.nn.functional.normalize(x, p=2, dim=1, eps=1e-12), as PML normalises embeddings:
// each row divided by max(its L2 norm, 1e-12); recorded by autograd.
Tensor normalize_rows(const Tensor& embeddings);

}  // namespace ember
