// What every metric-learning loss shares: its input checks and PML's normalisation.
//
//   check_embeddings("ntxent_loss", emb, labels);   // (B, D) f32/f64 and (B) i64, one device
//   Tensor e = normalize_rows(emb);                  // rows / max(||row||, 1e-12), differentiable
//   check_class_weights("arcface_loss", "W", W, 0, emb);   // W (D, C): D along dim 0
//
//   const PairLossInputs in = pair_loss_inputs("ntxent_loss", emb, labels, Shape{});  // checked, normalised
//   Tensor loss = ...;                  // the forward kernel on in.e, in.labels, in.poison -> in.counted
//   return record_pair_loss("ntxent_loss", in, loss, [=](const Tensor& grad, const Tensor& e) {
//     ...                                                // the backward kernel -> de
//   });
#pragma once

#include <functional>
#include <optional>

#include "core/tensor.h"
#include "ops/normalize.h"  // normalize_rows, normalize_columns: PML's normalisation
#include "ops/pair_tiles.h"

namespace ember {

// Embeddings (B, D) of a floating dtype and labels (B) of dtype i64 on the same device; an
// Error naming `op`, what was expected and what was given otherwise.
void check_embeddings(const char* op, const Tensor& embeddings, const Tensor& labels);

// The class weights of a classifier-style metric loss (ArcFace's W (D, C), ProxyAnchor's
// proxies (C, D)), checked against embeddings that passed check_embeddings: 2-D, the
// embeddings' dtype and device, the embedding size along dim `embedding_dim` and at least one
// class along the other; an Error naming `op`, `name`, what was expected and given otherwise.
void check_class_weights(const char* op, const char* name, const Tensor& weights, int64_t embedding_dim,
                         const Tensor& embeddings);

// Note [One node per loss]: every pair loss has the same shape: check the inputs, normalise the
// rows, run its forward kernel on the contiguous normalised rows e, and record ONE autograd node
// on e whose backward runs its backward kernel (normalisation's own nodes carry the gradient on to
// the embeddings; the only other node is the gate of Note [Non-finite embeddings] below the
// normalisation). These two helpers are that shape.
//
// Note [Non-finite embeddings] (ops/metric_rules.h) is carried here for the losses whose reducer
// drops terms or has a zero_loss path: `counted`, f64 of the shape the loss asks for, is where
// its forward kernel writes how many terms it averages (per part); a gate below the
// normalisation makes the embeddings' gradient 0 everywhere while no term is counted, else adds
// `poison` to every element. An undefined `counted` (counted_shape nullopt) turns the gate off.
struct PairLossInputs {
  Tensor e;          // (B, D) contiguous L2-normalised rows, recorded by autograd
  Tensor labels;     // (B) i64 contiguous
  PairTiles tiles;   // the tile setting at the call (the backward uses the same)
  Tensor poison;     // 0-d, e's dtype and device: nonfinite_poison(embeddings)
  Tensor counted;    // f64 on e's device, uninitialised: the loss's term counts, or undefined
};
PairLossInputs pair_loss_inputs(const char* op, const Tensor& embeddings, const Tensor& labels,
                                std::optional<Shape> counted_shape);

// sum(embeddings * 0) on the embeddings' device, not recorded: 0, or NaN when an element is NaN
// or inf (PML's zero_loss; Note [Non-finite embeddings] in ops/metric_rules.h).
Tensor nonfinite_poison(const Tensor& embeddings);

// Records loss = f(in.e) with backward(grad (0-d, contiguous), e) -> de when e needs grad; returns
// loss. The closure holds what the backward kernel needs (statistics, counts, options).
using PairLossBackward = std::function<Tensor(const Tensor& grad, const Tensor& e)>;
Tensor record_pair_loss(const char* op, const PairLossInputs& in, Tensor loss, PairLossBackward backward);

// Note [Gradient in the forward] (ops/cpu/triplet_tiled.cpp): a loss whose forward computed its
// gradient at grad 1, G, returns grad * G from its backward (its closure holds G, `mutable`). On
// the CPU, unless the backward retains the graph, G is scaled in place and handed over, so that
// no second tensor of its size is held; otherwise the product is a new tensor and G stays. grad:
// 0-d on G's device, of G's dtype or f64 (a factor computed in double). An undefined G (a
// gradient not wanted) stays undefined.
Tensor scaled_forward_gradient(Tensor& G, const Tensor& grad);

}  // namespace ember
