#include "autograd/graph.h"

namespace ember::autograd {
namespace detail {
std::string check_forward_anomaly(const char* name, uint64_t sequence, const std::vector<Tensor>& inputs,
                                  const Tensor& output);  // anomaly_mode.cpp
}  // namespace detail

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
  if (is_anomaly_enabled()) [[unlikely]]  // Note [Anomaly mode] in anomaly_mode.cpp
    node->forward_context = detail::check_forward_anomaly(name, node->sequence, inputs, output);
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
thread_local bool t_retaining_graph = false;
}

bool retaining_graph() { return t_retaining_graph; }
void set_retaining_graph(bool retaining) { t_retaining_graph = retaining; }

void check_inplace(const Tensor& t, const char* op) {
  EMBER_CHECK(!needs_grad(t), op, ": in-place write to a tensor that requires grad; "
              "do it under NoGradGuard or on a detach()ed tensor");
}

}  // namespace ember::autograd
