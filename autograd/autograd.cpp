#include "autograd/autograd.h"

#include <queue>
#include <unordered_map>

#include "ops/ops.h"

namespace ember::autograd {
namespace {
thread_local bool t_grad_enabled = true;
thread_local uint64_t t_sequence = 0;

Edge edge_for(const Tensor& t) {
  Edge e;
  AutogradMeta* meta = t.defined() ? t.autograd_meta() : nullptr;
  if (!meta || !meta->requires_grad) return e;
  if (meta->grad_fn) e.node = meta->grad_fn;
  else e.leaf = t.impl().autograd;
  e.shape = t.shape();
  e.dtype = t.dtype();
  return e;
}

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

// Note [Iterative teardown]: a node owns the nodes of its inputs, so the graph of an N-op chain
// (an unrolled RNN, a long loop) would otherwise be destroyed by N nested destructor calls and
// overflow the stack. Each node instead moves the input nodes it solely owns onto a local
// stack before it dies; they are released one at a time, each with its own inputs already
// taken, so the depth of the recursion is one.
Node::~Node() {
  std::vector<std::shared_ptr<Node>> orphans;
  auto adopt_inputs = [&orphans](Node& n) {
    for (Edge& e : n.inputs)
      if (e.node && e.node.use_count() == 1) orphans.push_back(std::move(e.node));
  };
  adopt_inputs(*this);
  while (!orphans.empty()) {
    std::shared_ptr<Node> n = std::move(orphans.back());
    orphans.pop_back();
    adopt_inputs(*n);
  }  // n dies here with no input nodes left to destroy recursively
}

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

bool needs_grad(const Tensor& t) {
  if (!t_grad_enabled || !t.defined()) return false;
  const AutogradMeta* m = t.autograd_meta();
  return m && m->requires_grad;
}

bool needs_grad(std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts)
    if (needs_grad(t)) return true;
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->sequence = ++t_sequence;
  node->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) node->inputs.push_back(edge_for(t));
  node->backward = std::move(backward);
  AutogradMeta& meta = output.ensure_autograd_meta();
  meta.requires_grad = true;
  meta.grad_fn = std::move(node);
}

void record(const char* name, std::initializer_list<Tensor> inputs, Tensor& output, BackwardFn backward) {
  record(name, std::vector<Tensor>(inputs), output, std::move(backward));
}

const Tensor& SavedTensor::get(const char* op) const {
  EMBER_CHECK(!tensor_.defined() || tensor_.version() == version_, op,
              ": a tensor saved for backward was modified in place after it was saved (version ",
              version_, " -> ", tensor_.version(), "); use an out-of-place op or clone() it first");
  return tensor_;
}

Tensor SavedTensor::take(const char* op) {
  Tensor t = get(op);
  if (!retaining_graph()) tensor_ = Tensor();
  return t;
}

namespace {
thread_local bool g_retaining_graph = false;
}

bool retaining_graph() { return g_retaining_graph; }

void check_inplace(const Tensor& t, const char* op) {
  EMBER_CHECK(!needs_grad(t), op, ": in-place write to a tensor that requires grad; "
              "do it under NoGradGuard or on a detach()ed tensor");
}

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
    bool saved = g_retaining_graph;
    ~RetainFlag() { g_retaining_graph = saved; }
  } restore_flag;
  g_retaining_graph = retain_graph;
  if (!meta->grad_fn) {
    accumulate_into_leaf(*meta, seed);
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
    for (size_t i = 0; i < grads.size(); ++i) {
      const Edge& e = node->inputs[i];
      Tensor& g = grads[i];
      if (!e.active() || !g.defined()) continue;
      EMBER_CHECK(g.shape() == e.shape && g.dtype() == e.dtype, "backward of '", node->name,
                  "': gradient ", i, " has shape ", shape_str(g.shape()), " and dtype ",
                  dtype_name(g.dtype()), ", expected ", shape_str(e.shape), " and ", dtype_name(e.dtype));
      if (e.leaf) {
        accumulate_into_leaf(*e.leaf, g);
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
}

}  // namespace ember::autograd
