// The backward engine (see engine.h): runs the recorded graph in reverse sequence order.
#include "autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "autograd/hooks.h"
#include "ops/ops.h"

namespace ember::autograd {
namespace {

// Adds a gradient into a leaf's .grad(). The first gradient is adopted when nothing else can
// see it (no copy); otherwise it is copied, because a stored .grad() may later be modified in
// place (gradient clipping) and must not alias another tensor. "Nothing else" covers the
// storage too: a view op's backward returns a fresh handle on storage that other gradients
// (another leaf's, through add's shared gradient) may also view.
void accumulate_into_leaf(AutogradMeta& leaf, const Tensor& g) {
  if (!leaf.grad.defined()) {
    const bool exclusive = g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1 &&
                           g.is_contiguous() && g.offset() == 0 && g.storage().nbytes == g.nbytes();
    leaf.grad = exclusive ? g : g.clone();
  } else {
    leaf.grad = add(leaf.grad, g);
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph) {
  AutogradMeta* meta = root.autograd_meta();
  EMBER_CHECK(meta && meta->requires_grad,
              "backward: the tensor does not require grad and has no grad_fn (was it computed "
              "under NoGradGuard, or from inputs without requires_grad?)");
  Tensor seed = grad_root;
  if (!seed.defined()) {
    EMBER_CHECK(root.numel() == 1, "backward: a gradient can be created implicitly only for a "
                "one-element output; got shape ", shape_str(root.shape()), ", pass backward(grad)");
    seed = ones_like(root);
  }
  EMBER_CHECK(seed.shape() == root.shape(), "backward: gradient has shape ", shape_str(seed.shape()),
              " but the output has shape ", shape_str(root.shape()));
  EMBER_CHECK(seed.dtype() == root.dtype(), "backward: gradient has dtype ", dtype_name(seed.dtype()),
              " but the output has dtype ", dtype_name(root.dtype()));

  NoGradGuard no_grad;
  struct RetainFlag {  // restores the enclosing pass's flag (a backward inside a backward closure)
    bool saved = retaining_graph();
    ~RetainFlag() { set_retaining_graph(saved); }
  } restore_flag;
  set_retaining_graph(retain_graph);
  PassHooks hooks(meta->grad_fn);  // Note [Post-accumulate hooks] in hooks.h
  if (!meta->grad_fn) {
    accumulate_into_leaf(*meta, seed);
    hooks.accumulated(*meta);
    hooks.finish();
    return;
  }

  auto later_first = [](const Node* a, const Node* b) { return a->sequence < b->sequence; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  std::unordered_map<Node*, Tensor> pending;  // gradient accumulated for each node's output
  std::vector<std::shared_ptr<Node>> visited;  // keeps nodes alive while the pass runs
  pending[meta->grad_fn.get()] = seed;
  ready.push(meta->grad_fn.get());
  visited.push_back(meta->grad_fn);

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    Tensor grad_out = std::move(pending[node]);
    pending.erase(node);
    EMBER_CHECK(node->backward, "backward: the graph through '", node->name,
                "' was already freed by an earlier backward(); pass retain_graph=true to the "
                "first backward() to run backward twice");
    TensorList grads = node->backward(std::move(grad_out));  // the closure may free it early
    if (!retain_graph) node->backward = nullptr;
    EMBER_CHECK(grads.size() == node->inputs.size(), "backward of '", node->name, "' returned ",
                grads.size(), " gradients for ", node->inputs.size(), " inputs");
    if (is_anomaly_enabled()) [[unlikely]] check_backward_anomaly(*node, grads);  // Note [Anomaly mode]
    for (size_t i = 0; i < grads.size(); ++i) {
      const Edge& e = node->inputs[i];
      Tensor& g = grads[i];
      if (!e.active() || !g.defined()) continue;
      EMBER_CHECK(g.shape() == e.shape && g.dtype() == e.dtype, "backward of '", node->name,
                  "': gradient ", i, " has shape ", shape_str(g.shape()), " and dtype ",
                  dtype_name(g.dtype()), ", expected ", shape_str(e.shape), " and ", dtype_name(e.dtype));
      if (e.leaf) {
        accumulate_into_leaf(*e.leaf, g);
        hooks.accumulated(*e.leaf);
        continue;
      }
      auto [it, inserted] = pending.try_emplace(e.node.get(), g);
      if (inserted) {
        ready.push(e.node.get());
        visited.push_back(e.node);
      } else {
        it->second = add(it->second, g);
      }
    }
  }
  hooks.finish();
}



}  // namespace ember::autograd

namespace ember {

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::run_backward(*this, grad, retain_graph);
}

}  // namespace ember
