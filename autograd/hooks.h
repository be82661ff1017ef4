// Hooks into the backward pass: code that must run when a leaf's gradient is complete, or when
// the pass ends. DistributedDataParallel (nn/distributed/) launches a bucket's all-reduce from
// the first and waits for all of them in the second, as PyTorch's reducer does with
// register_post_accumulate_grad_hook and Engine::queue_callback.
//
//   autograd::HookHandle h = autograd::add_post_accumulate_hook(w, [&] { use(w.grad()); });
//   autograd::queue_callback([&] { finish(); });   // from inside a backward pass
//
// Note [Post-accumulate hooks]: the engine adds gradients into a leaf edge by edge, so a leaf
// used twice (a shared weight) receives several. A hook must see the final sum, so before a
// pass that can reach hooked leaves the engine counts the edges into each of them (one walk
// over the graph, made only while some hook exists anywhere) and runs a leaf's hooks when its
// last edge has delivered. An edge that delivers no gradient (undefined, or from a node the
// pass never reaches) does not count down; the hooks of such leaves run when the pass ends,
// before the queued callbacks, so every hooked leaf of the graph fires exactly once per pass.
// Leaves outside the graph do not fire.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "autograd/graph.h"

namespace ember::autograd {

// Removes its hook when destroyed (or on reset()); movable, not copyable.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::shared_ptr<AutogradMeta> leaf, uint64_t id) : leaf_(std::move(leaf)), id_(id) {}
  HookHandle(HookHandle&& other) noexcept { *this = std::move(other); }
  HookHandle& operator=(HookHandle&& other) noexcept;
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  ~HookHandle() { reset(); }
  void reset();

 private:
  std::shared_ptr<AutogradMeta> leaf_;
  uint64_t id_ = 0;
};

// Runs `hook` after backward has accumulated the last gradient of `leaf` in each pass (Note
// [Post-accumulate hooks]); `leaf` must be a leaf that requires grad.
[[nodiscard]] HookHandle add_post_accumulate_hook(const Tensor& leaf, std::function<void()> hook);

// Runs `callback` when the backward pass now running on this thread ends (after every hook);
// an error outside a backward pass. A pass that throws drops its callbacks.
void queue_callback(std::function<void()> callback);

// The engine's side (engine.cpp): one per backward pass.
class PassHooks {
 public:
  explicit PassHooks(const std::shared_ptr<Node>& root);  // null root: the root is a leaf
  ~PassHooks();
  PassHooks(const PassHooks&) = delete;
  PassHooks& operator=(const PassHooks&) = delete;
  // After a gradient has been added into `leaf`.
  void accumulated(AutogradMeta& leaf);
  // After the last node: the hooks still owed, then the queued callbacks.
  void finish();

 private:
  std::unordered_map<AutogradMeta*, int64_t> edges_left_;
  std::vector<std::function<void()>>* outer_callbacks_;
  std::vector<std::function<void()>> callbacks_;
};

}  // namespace ember::autograd
