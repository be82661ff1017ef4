// User-level fibers for the SIMT simulator: a function running on a stack of its own that can
// suspend itself and be resumed later by the thread that resumed it. A switch saves only the
// callee-saved registers, a few nanoseconds where waking an OS thread costs microseconds
// (Note [Fiber switch] in fiber.cpp).
//
//   Fiber f(256 * 1024);
//   f.start(&work, &args);        // work(&args) will run on f's stack
//   while (!f.resume()) {}        // runs it until it calls f.suspend() or work returns
//
// A fiber runs on the OS thread that resumes it; the simulator resumes all the fibers of a
// launch from one thread. Available on x86-64 (fibers_supported()); elsewhere the simulator
// runs every CUDA thread as an OS thread.
#pragma once

#include <cstddef>

namespace ember::sim {

bool fibers_supported();

class Fiber {
 public:
  explicit Fiber(size_t stack_bytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Makes entry(arg) the fiber's work from the top of its stack; the previous work, if any,
  // must have returned.
  void start(void (*entry)(void* arg), void* arg);
  // Runs the fiber until it suspends (false) or its work returns (true).
  bool resume();
  // Called from the fiber's work: returns to resume()'s caller, and continues when resumed.
  void suspend();

 private:
  static void run(void* self);  // the first frame on the fiber's stack

  void* mapping_ = nullptr;  // guard page + stack
  size_t mapping_bytes_ = 0;
  void* stack_bottom_ = nullptr;  // lowest usable address
  size_t stack_bytes_ = 0;
  void* fiber_sp_ = nullptr;    // the fiber's stack pointer while it is suspended
  void* resumer_sp_ = nullptr;  // the resumer's while the fiber runs
  void (*entry_)(void*) = nullptr;
  void* arg_ = nullptr;
  bool finished_ = true;
  // AddressSanitizer's view of the switch (Note [Fibers under AddressSanitizer] in fiber.cpp).
  void* fiber_fake_stack_ = nullptr;
  const void* resumer_bottom_ = nullptr;
  size_t resumer_bytes_ = 0;
};

}  // namespace ember::sim
