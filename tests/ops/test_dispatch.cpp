// The DeviceKernel stubs (ops/kernels.h, ops/dispatch.h): every stub is registered under a
// unique snake_case name, and a build with a CUDA backend binds a CUDA function to every one.
#include <cctype>
#include <set>
#include <string>

#include "cuda/runtime.h"
#include "ops/kernels.h"

#include "support/test_support.h"

using namespace ember;

namespace {

bool is_snake_case(const std::string& name) {
  if (name.empty() || !std::islower(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

}  // namespace

TEST_CASE("dispatch: every stub has a unique snake_case name", "[ops][dispatch]") {
  const auto& kernels = device_kernels();
  REQUIRE(kernels.size() >= 40);
  std::set<std::string> names;
  for (const DeviceKernelBase* k : kernels) {
    INFO("stub '" << k->name() << "'");
    CHECK(is_snake_case(k->name()));
    CHECK(names.insert(k->name()).second);
  }
}

TEST_CASE("dispatch: a CUDA build binds a CUDA function to every stub", "[ops][dispatch][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  // The first cuda tensor initialises the backend (Note [Lazy CUDA backend] in ops/dispatch.cpp).
  const Tensor probe = Tensor::empty({1}, {.device = Device::cuda()});
  REQUIRE(probe.is_cuda());
  for (const DeviceKernelBase* k : device_kernels()) {
    INFO("stub '" << k->name() << "' has no CUDA binding: bind it in its ops/cuda/<family>.cu");
    CHECK(k->has_cuda());
  }
  CHECK(cross_device_copy() != nullptr);
}
