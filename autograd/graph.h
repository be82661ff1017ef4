// Tape-based reverse-mode autograd: the graph that ops record (this header, below the op layer)
// and the engine that runs it backward (autograd/engine.h, above the op layer, since
// accumulating gradients takes ops), as PyTorch separates its function.h from its engine.cpp.
//
// An op that computes `y` from inputs that need grad records a Node: its inputs, a backward
// closure with typed captures, and a sequence number from a per-thread counter, so the nodes
// form a tape in forward order. backward() replays that tape in reverse: it keeps a max-heap of
// the nodes that have received a gradient, ordered by sequence number, and since every input of
// a node was created before it, popping the largest number first visits each node only after
// all of its consumers have contributed.
//
//   Tensor y = exp(x);   // inside exp():
//   if (autograd::needs_grad(x))
//     autograd::record("exp", {x}, y, [ys = autograd::save(y)](const Tensor& g) {
//       return autograd::TensorList{mul(g, ys.get("exp"))};
//     });
//
// Note [Tape ownership]: the nodes are owned by the tensors they produced (AutogradMeta::grad_fn)
// and by the nodes that consume them, not by a global list. A forward pass that is never
// backpropagated (evaluation without NoGradGuard) then frees its graph as soon as its outputs
// die, instead of growing a thread-local tape forever. The tape order is the sequence number.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

using TensorList = std::vector<Tensor>;
// Receives the gradient of the node's output; returns one gradient per recorded input, in
// order (an undefined Tensor where an input gets none). The gradient is handed over: a closure
// that takes it by value (`[..](Tensor g)`) may drop it as soon as it is consumed, so that it
// is not live next to the input gradients (most closures take `const Tensor&`, which works too).
using BackwardFn = std::function<TensorList(Tensor grad_output)>;

struct Node;

// Where a node sends the gradient of one input: to the node that produced it, or into the
// .grad() of a leaf.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<AutogradMeta> leaf;
  Shape shape;  // the input's shape, to check what backward returns
  DType dtype = DType::f32;
  bool active() const { return node || leaf; }
};

struct Node {
  const char* name = "";
  uint64_t sequence = 0;
  std::vector<Edge> inputs;
  BackwardFn backward;  // reset after use unless the graph is retained
  // How the forward created this node ("op #12: log((3)) -> (3)"), recorded only in anomaly
  // mode, for backward's error (Note [Anomaly mode] in autograd/anomaly_mode.cpp).
  std::string forward_context;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();  // iterative, see Note [Iterative teardown] in graph.cpp
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;                       // leaves only
  std::shared_ptr<Node> grad_fn;     // null for leaves
  // Leaves only: run once per backward pass after its last gradient (autograd/hooks.h).
  std::vector<std::pair<uint64_t, std::function<void()>>> post_accumulate_hooks;
};

// ---- grad mode --------------------------------------------------------------------------------
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// Disables recording in its scope (the optimizer step, evaluation, backward itself).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// ---- anomaly mode (Note [Anomaly mode] in autograd/anomaly_mode.cpp) ---------------------------
// Like torch.autograd.detect_anomaly: while on (per thread), every op that records checks its
// output for NaN/Inf, and backward checks every gradient a node returns; the first non-finite
// tensor is an AnomalyError naming the op. Each check synchronises with the device, so it is a
// debugging mode; when off it costs one thread-local bool test per recorded op.
//
//   {
//     autograd::DetectAnomalyGuard anomaly;     // on in this scope (and restored after it)
//     loss = model(x); loss.backward();         // "anomaly: forward of log produced NaN at ..."
//   }
bool is_anomaly_enabled();
void set_detect_anomaly(bool enabled);

class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true) : previous_(is_anomaly_enabled()) { set_detect_anomaly(enabled); }
  ~DetectAnomalyGuard() { set_detect_anomaly(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

// What anomaly mode throws: "anomaly: forward of <op> produced ..." or "anomaly: backward of
// <op> returned ...".
class AnomalyError : public Error {
 public:
  using Error::Error;
};

// Describes the NaN/Inf elements of a tensor ("NaN at element 17 of (8, 32, 14, 14) (3 NaN, 0
// Inf among 6272 elements)"), or returns "" when it has none; runs on the tensor's device. The
// op layer installs it (ops/nonfinite.cpp); anomaly mode cannot check anything without it.
using NonfiniteDescriber = std::string (*)(const Tensor& t);
void set_nonfinite_describer(NonfiniteDescriber describe);

// Run by the engine after a node's backward, in anomaly mode: an AnomalyError for the first
// gradient of an active input that holds NaN/Inf, naming the node, the input and how the
// forward created the node.
void check_backward_anomaly(const Node& node, const TensorList& grads);

// True when grad mode is on and `t` requires grad.
bool needs_grad(const Tensor& t);
bool needs_grad(std::initializer_list<Tensor> ts);

// Makes `output` the result of a recorded node. `inputs` are the op's inputs in the order the
// backward closure returns their gradients.
void record(const char* name, std::initializer_list<Tensor> inputs, Tensor& output, BackwardFn backward);
void record(const char* name, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward);

// A tensor saved for backward: detached (no reference cycle through the graph) and stamped
// with its storage version, so a later in-place write is reported instead of silently giving
// wrong gradients.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t) : tensor_(t.defined() ? t.detach() : Tensor()),
                                          version_(t.defined() ? t.version() : 0) {}
  const Tensor& get(const char* op) const;
  // get(), handed over: unless the running backward retains the graph, the saved reference is
  // dropped, so the tensor can be freed as soon as the caller's copy is (a closure that calls
  // this is `mutable`). For fused backwards whose saved output is consumed first and would
  // otherwise stay live through their heaviest work.
  Tensor take(const char* op);

 private:
  Tensor tensor_;
  uint32_t version_ = 0;
};
inline SavedTensor save(const Tensor& t) { return SavedTensor(t); }

// True while this thread runs a backward pass with retain_graph (saved tensors must survive it).
bool retaining_graph();
// Set by the engine (engine.cpp) for the duration of a backward pass.
void set_retaining_graph(bool retaining);

// Refuses an in-place write to a tensor that autograd tracks (op names the write).
void check_inplace(const Tensor& t, const char* op);

}  // namespace ember::autograd
