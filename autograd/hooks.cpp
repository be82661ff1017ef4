// Post-accumulate hooks and end-of-pass callbacks (hooks.h).
#include "autograd/hooks.h"

#include <algorithm>
#include <atomic>
#include <unordered_set>

namespace ember::autograd {
namespace {

std::atomic<int64_t> g_hooks_alive{0};  // the counting walk is skipped while this is 0
std::atomic<uint64_t> g_next_hook_id{1};
// The callbacks of the pass now running on this thread (null outside a pass).
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

void run_hooks(AutogradMeta& leaf) {
  for (auto& [id, hook] : leaf.post_accumulate_hooks) hook();
}

}  // namespace

HookHandle& HookHandle::operator=(HookHandle&& other) noexcept {
  if (this != &other) {
    reset();
    leaf_ = std::move(other.leaf_);
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

void HookHandle::reset() {
  if (!leaf_) return;
  std::erase_if(leaf_->post_accumulate_hooks, [this](const auto& h) { return h.first == id_; });
  leaf_.reset();
  g_hooks_alive.fetch_sub(1);
}

HookHandle add_post_accumulate_hook(const Tensor& leaf, std::function<void()> hook) {
  EMBER_CHECK(leaf.defined() && leaf.requires_grad() && leaf.is_leaf(),
              "add_post_accumulate_hook: expected a leaf tensor that requires grad (a parameter)");
  const uint64_t id = g_next_hook_id.fetch_add(1);
  leaf.impl().autograd->post_accumulate_hooks.emplace_back(id, std::move(hook));
  g_hooks_alive.fetch_add(1);
  return HookHandle(leaf.impl().autograd, id);
}

void queue_callback(std::function<void()> callback) {
  EMBER_CHECK(t_callbacks, "queue_callback: called outside a backward pass");
  t_callbacks->push_back(std::move(callback));
}

PassHooks::PassHooks(const std::shared_ptr<Node>& root) : outer_callbacks_(t_callbacks) {
  t_callbacks = &callbacks_;
  if (!root || g_hooks_alive.load() == 0) return;
  std::unordered_set<Node*> seen{root.get()};
  std::vector<Node*> stack{root.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->inputs) {
      if (e.leaf && !e.leaf->post_accumulate_hooks.empty()) ++edges_left_[e.leaf.get()];
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
}

PassHooks::~PassHooks() { t_callbacks = outer_callbacks_; }

void PassHooks::accumulated(AutogradMeta& leaf) {
  if (leaf.post_accumulate_hooks.empty()) return;
  auto it = edges_left_.find(&leaf);
  if (it == edges_left_.end()) {  // not counted: the root itself
    run_hooks(leaf);
  } else if (--it->second == 0) {
    edges_left_.erase(it);
    run_hooks(leaf);
  }
}

void PassHooks::finish() {
  // The leaves some edge of the graph left without a gradient, in a fixed order (the map's is
  // not): by the ids of their first hooks, i.e. registration order.
  std::vector<AutogradMeta*> owed;
  for (auto& [leaf, left] : edges_left_)
    if (!leaf->post_accumulate_hooks.empty()) owed.push_back(leaf);
  std::sort(owed.begin(), owed.end(), [](AutogradMeta* a, AutogradMeta* b) {
    return a->post_accumulate_hooks.front().first < b->post_accumulate_hooks.front().first;
  });
  edges_left_.clear();
  for (AutogradMeta* leaf : owed) run_hooks(*leaf);
  // A callback may queue another (run in the same pass).
  for (size_t i = 0; i < callbacks_.size(); ++i) {
    auto callback = std::move(callbacks_[i]);
    callback();
  }
  callbacks_.clear();
}

}  // namespace ember::autograd
