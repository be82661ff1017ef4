// Fibers for the SIMT simulator (fiber.h).
//
// Note [Fiber switch]: a switch is a call to ember_sim_fiber_switch(save, load), written in
// assembly below. Being an ordinary call, the compiler has already spilled every
// caller-saved register (all vector registers included, in the System V ABI); the function
// pushes the six callee-saved ones and the SSE/x87 control words, stores the stack pointer in
// *save, loads `load` as the new stack pointer, pops the other context's registers and
// returns into it: about twenty instructions, no system call (glibc's swapcontext makes one,
// to save the signal mask, which costs more than the rest of a barrier). A fresh fiber's stack
// is laid out as if it had been switched away from just before ember_sim_fiber_trampoline,
// which calls Fiber::run(this) with the stack aligned as the ABI requires.
//
// Note [Fibers under AddressSanitizer]: ASan keeps the bounds of the stack each thread runs
// on (to unpoison it when an exception unwinds, and to tell stack from heap in reports), and
// a fake stack per frame for use-after-return checks. Every switch therefore tells it where
// execution goes (__sanitizer_start_switch_fiber) and, once there, where it came from
// (__sanitizer_finish_switch_fiber), as its documentation prescribes for user-level threads.
// ThreadSanitizer builds do not use fibers: the simulator runs OS threads there, which is what
// makes races between CUDA threads visible (executor.cpp).
#include "cuda/sim/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMBER_SIM_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMBER_SIM_FIBER_ASAN 1
#endif
#endif
#if EMBER_SIM_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace ember::sim {
namespace {

void asan_start_switch(void** fake_stack_save, const void* bottom, size_t bytes) {
#if EMBER_SIM_FIBER_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, bytes);
#else
  (void)fake_stack_save, (void)bottom, (void)bytes;
#endif
}

void asan_finish_switch(void* fake_stack_save, const void** bottom_old, size_t* bytes_old) {
#if EMBER_SIM_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, bytes_old);
#else
  (void)fake_stack_save, (void)bottom_old, (void)bytes_old;
#endif
}

}  // namespace
}  // namespace ember::sim

#if defined(__x86_64__)

extern "C" void ember_sim_fiber_switch(void** save_sp, void* load_sp);
extern "C" void ember_sim_fiber_trampoline();

// Note [Fiber switch]. The saved context, from the stack pointer upwards: MXCSR (4 bytes) and
// the x87 control word (2, padded to 4), r15, r14, r13, r12, rbx, rbp, return address.
asm(R"(
  .text
  .p2align 4
  .globl ember_sim_fiber_switch
  .hidden ember_sim_fiber_switch
  .type ember_sim_fiber_switch, @function
ember_sim_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ember_sim_fiber_switch, .-ember_sim_fiber_switch

  .p2align 4
  .globl ember_sim_fiber_trampoline
  .hidden ember_sim_fiber_trampoline
  .type ember_sim_fiber_trampoline, @function
ember_sim_fiber_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size ember_sim_fiber_trampoline, .-ember_sim_fiber_trampoline
)");

namespace ember::sim {

bool fibers_supported() { return true; }

Fiber::Fiber(size_t stack_bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  mapping_bytes_ = stack_bytes_ + page;  // the lowest page stays inaccessible: an overflow faults
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                  -1, 0);
  EMBER_CHECK(mapping_ != MAP_FAILED, "SIMT simulator: cannot map a ", stack_bytes_, "-byte fiber stack: ",
              std::strerror(errno));
  EMBER_CHECK(mprotect(mapping_, page, PROT_NONE) == 0, "SIMT simulator: cannot protect a fiber's guard page: ",
              std::strerror(errno));
  stack_bottom_ = static_cast<char*>(mapping_) + page;
}

Fiber::~Fiber() { munmap(mapping_, mapping_bytes_); }

void Fiber::start(void (*entry)(void*), void* arg) {
  EMBER_CHECK(finished_, "SIMT simulator: a fiber was restarted before its work returned");
  entry_ = entry;
  arg_ = arg;
  finished_ = false;
  uint32_t mxcsr = 0;
  uint16_t x87_control = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(x87_control));
  // The top of the stack is page-aligned; the saved context sits 80 bytes below it, so that
  // the trampoline's call happens with a 16-byte-aligned stack pointer.
  auto** sp = reinterpret_cast<void**>(static_cast<char*>(stack_bottom_) + stack_bytes_ - 80);
  std::memset(sp, 0, 8 * sizeof(void*));  // r15, r14, rbx and rbp (no caller frame) start at 0
  std::memcpy(sp, &mxcsr, sizeof mxcsr);
  std::memcpy(reinterpret_cast<char*>(sp) + 4, &x87_control, sizeof x87_control);
  sp[3] = reinterpret_cast<void*>(&Fiber::run);  // r13
  sp[4] = this;                                  // r12
  sp[7] = reinterpret_cast<void*>(&ember_sim_fiber_trampoline);
  fiber_sp_ = sp;
}

bool Fiber::resume() {
  if (finished_) return true;
  void* resumer_fake_stack = nullptr;
  asan_start_switch(&resumer_fake_stack, stack_bottom_, stack_bytes_);
  ember_sim_fiber_switch(&resumer_sp_, fiber_sp_);
  asan_finish_switch(resumer_fake_stack, nullptr, nullptr);
  return finished_;
}

void Fiber::suspend() {
  asan_start_switch(&fiber_fake_stack_, resumer_bottom_, resumer_bytes_);
  ember_sim_fiber_switch(&fiber_sp_, resumer_sp_);
  asan_finish_switch(fiber_fake_stack_, &resumer_bottom_, &resumer_bytes_);
}

void Fiber::run(void* self) {
  auto* f = static_cast<Fiber*>(self);
  asan_finish_switch(nullptr, &f->resumer_bottom_, &f->resumer_bytes_);
  try {
    f->entry_(f->arg_);
  } catch (...) {  // nothing above this frame could catch it: no unwind information
    std::fputs("ember: SIMT simulator: an exception escaped a fiber's work\n", stderr);
    std::abort();
  }
  f->finished_ = true;
  asan_start_switch(nullptr, f->resumer_bottom_, f->resumer_bytes_);  // this stack's frames end here
  ember_sim_fiber_switch(&f->fiber_sp_, f->resumer_sp_);
  __builtin_unreachable();
}

}  // namespace ember::sim

#else  // not x86-64: the simulator runs OS threads only

namespace ember::sim {
bool fibers_supported() { return false; }
Fiber::Fiber(size_t) { EMBER_FAIL("SIMT simulator: fibers are implemented for x86-64 only"); }
Fiber::~Fiber() = default;
void Fiber::start(void (*)(void*), void*) {}
bool Fiber::resume() { return true; }
void Fiber::suspend() {}
void Fiber::run(void*) {}
}  // namespace ember::sim

#endif
