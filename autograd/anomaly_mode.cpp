// Anomaly mode (graph.h): the per-thread switch and the checks that record() and the engine run
// while it is on.
//
// Note [Anomaly mode]: the checks sit at the two places every op passes through, not in the
// ops: record() checks the output of each op that records (before the node is attached, so an
// op that produced NaN from finite inputs is named), and the engine checks what each node's
// backward returns before the gradients travel on. A check is a reduction on the tensor's
// device (count_nonfinite, ops/kernels.h) followed by reading its three numbers on the host:
// one device synchronisation per recorded op and per gradient, which the Performance rules
// forbid in a training step and which is accepted here because the mode exists to debug one.
// When the mode is off, record() tests one thread-local bool and the engine another; nothing
// else runs and nodes carry no context. Only ops that record are checked in forward (an op on
// tensors that need no gradient has no single place to hook); a non-finite input that such an
// op, a leaf or the data produced is reported as "already non-finite" by the first recording
// op that consumes it. The forward context a node keeps for backward's message is the op's
// name, its sequence number and the shapes, as PyTorch keeps the forward's traceback.
#include <atomic>

#include "autograd/graph.h"

namespace ember::autograd {
namespace {

thread_local bool t_anomaly_enabled = false;
std::atomic<NonfiniteDescriber> g_describe_nonfinite{nullptr};

// "" when t is undefined or finite; otherwise what the op layer's reduction found.
std::string nonfinite_in(const Tensor& t) {
  if (!t.defined()) return "";
  const NonfiniteDescriber describe = g_describe_nonfinite.load();
  EMBER_CHECK(describe != nullptr, "anomaly mode: no non-finite check is installed (the op layer installs it; "
              "is this program linked without ember's ops?)");
  return describe(t);
}

[[noreturn]] void throw_anomaly(const std::string& message) { throw AnomalyError(message, __FILE__, __LINE__); }

std::string shapes_str(const std::vector<Tensor>& inputs) {
  std::string s;
  for (const Tensor& t : inputs) s += (s.empty() ? "" : ", ") + (t.defined() ? shape_str(t.shape()) : "none");
  return s;
}

}  // namespace

bool is_anomaly_enabled() { return t_anomaly_enabled; }
void set_detect_anomaly(bool enabled) { t_anomaly_enabled = enabled; }
void set_nonfinite_describer(NonfiniteDescriber describe) { g_describe_nonfinite.store(describe); }

namespace detail {

// In record(), anomaly mode only: throws when `output` holds NaN/Inf; otherwise returns the
// context the node keeps for backward.
std::string check_forward_anomaly(const char* name, uint64_t sequence, const std::vector<Tensor>& inputs,
                                  const Tensor& output) {
  const std::string found = nonfinite_in(output);
  if (!found.empty()) {
    std::string cause;  // which inputs were already non-finite (only on this failure path)
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string in = nonfinite_in(inputs[i]);
      if (!in.empty()) cause += ::ember::detail::concat("; its input ", i, " already holds ", in);
    }
    throw_anomaly(::ember::detail::concat("anomaly: forward of ", name, " produced ", found,
                                 cause.empty() ? " from finite inputs " + shapes_str(inputs)
                                               : cause + " (it came from a leaf, the data or an op that does not record)"));
  }
  return ::ember::detail::concat("op #", sequence, ": ", name, "(", shapes_str(inputs), ") -> ", shape_str(output.shape()));
}

}  // namespace detail

void check_backward_anomaly(const Node& node, const TensorList& grads) {
  for (size_t i = 0; i < grads.size() && i < node.inputs.size(); ++i) {
    if (!node.inputs[i].active()) continue;  // a gradient nobody receives cannot spread NaN
    const std::string found = nonfinite_in(grads[i]);
    if (!found.empty())
      throw_anomaly(::ember::detail::concat("anomaly: backward of ", node.name, " returned ", found, " in the gradient of its input ",
                                   i, "; the node was created in forward as ",
                                   node.forward_context.empty() ? "(not recorded: anomaly mode was off in forward)"
                                                                : node.forward_context));
  }
}

}  // namespace ember::autograd
