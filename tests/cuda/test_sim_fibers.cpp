// The simulator's fibers (cuda/sim/fiber.h) and what running CUDA threads on them must keep:
// the same results as OS threads, a thread that spins on another one still finishes, and the
// mode follows EMBER_SIM_EXECUTION.
#include <cfenv>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/sim/fiber.h"
#include "device_buffer.h"
#include "sample_kernels.h"
#include "sim_execution.h"

namespace tk = ember::test_kernels;
using ember::sim::Fiber;
using ember::testing::DeviceBuffer;
using ember::testing::for_each_sim_execution;

namespace {

struct PingPong {
  Fiber* fiber;
  std::vector<std::string>* log;
};

void ping(void* arg) {
  auto& p = *static_cast<PingPong*>(arg);
  for (int i = 0; i < 3; ++i) {
    p.log->push_back("fiber " + std::to_string(i));
    p.fiber->suspend();
  }
}

int stack_depth(int n) {  // about 300 bytes of the fiber's stack per level
  volatile char frame[256];
  frame[n % 256] = 1;
  return n == 0 ? 0 : stack_depth(n - 1) + frame[n % 256];
}

}  // namespace

TEST_CASE("a fiber runs until it suspends, continues where it stopped, and can be started again") {
  if (!ember::sim::fibers_available()) EMBER_SKIP("fibers are unavailable in this build (ThreadSanitizer or not x86-64)");
  Fiber fiber(64 * 1024);
  std::vector<std::string> log;
  PingPong p{&fiber, &log};
  for (int run = 0; run < 2; ++run) {
    fiber.start(&ping, &p);
    for (int i = 0; i < 3; ++i) {
      REQUIRE_FALSE(fiber.resume());
      log.push_back("resumer " + std::to_string(i));
    }
    REQUIRE(fiber.resume());  // the loop ends and ping returns
    REQUIRE(fiber.resume());  // a finished fiber stays finished
  }
  const std::vector<std::string> once{"fiber 0", "resumer 0", "fiber 1", "resumer 1", "fiber 2", "resumer 2"};
  std::vector<std::string> twice = once;
  twice.insert(twice.end(), once.begin(), once.end());
  REQUIRE(log == twice);
}

TEST_CASE("a fiber keeps its own floating-point rounding mode, exceptions and stack") {
  if (!ember::sim::fibers_available()) EMBER_SKIP("fibers are unavailable in this build (ThreadSanitizer or not x86-64)");
  struct State {
    Fiber* fiber;
    int mode_after_resume = 0;
    std::string caught;
    int deep = 0;
  };
  Fiber fiber(256 * 1024);
  State s{&fiber};
  fiber.start(
      [](void* arg) {
        auto& st = *static_cast<State*>(arg);
        std::fesetround(FE_UPWARD);
        st.fiber->suspend();
        st.mode_after_resume = std::fegetround();
        std::fesetround(FE_TONEAREST);
        try {
          throw std::runtime_error("thrown and caught on the fiber's stack");
        } catch (const std::exception& e) {
          st.caught = e.what();
        }
        st.deep = stack_depth(200);
      },
      &s);
  REQUIRE_FALSE(fiber.resume());
  REQUIRE(std::fegetround() == FE_TONEAREST);  // the fiber's FE_UPWARD stayed with it
  REQUIRE(fiber.resume());
  REQUIRE(s.mode_after_resume == FE_UPWARD);
  REQUIRE(s.caught == "thrown and caught on the fiber's stack");
  REQUIRE(s.deep == 200);
}

TEST_CASE("a CUDA thread spinning on atomicCAS for another thread of its block finishes") {
  for_each_sim_execution([&] {
    for (unsigned threads : {2u, 64u, 256u}) {
      DeviceBuffer<int> flag(std::vector<int>{0}), out(std::vector<int>{0});
      tk::wait_for_last_thread(flag.get(), out.get(), threads);
      REQUIRE(flag.download() == std::vector<int>{2});
      REQUIRE(out.download() == std::vector<int>{1});
    }
  });
}

TEST_CASE("the execution mode follows EMBER_SIM_EXECUTION") {
  const char* env = std::getenv("EMBER_SIM_EXECUTION");
  const std::string asked = env ? env : "";
  const bool fibers = ember::sim::execution() == ember::sim::Execution::fibers;
  if (asked == "threads" || !ember::sim::fibers_available()) REQUIRE_FALSE(fibers);
  else REQUIRE(fibers);
}
