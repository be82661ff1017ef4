// The backward engine: replays the graph recorded by the ops (autograd/graph.h) in reverse.
//
//   Tensor loss = sum(exp(x));
//   loss.backward();                                  // = autograd::run_backward(loss, {}, false)
//   std::cout << x.grad();
//
// It keeps a max-heap of the nodes that have received a gradient, ordered by sequence number;
// since every input of a node was created before it, popping the largest number first visits
// each node only after all of its consumers have contributed. It sits above the op layer: it
// adds gradients with add() and seeds them with ones_like().
#pragma once

#include "autograd/graph.h"

namespace ember::autograd {

// Runs the backward pass from `root` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

}  // namespace ember::autograd
