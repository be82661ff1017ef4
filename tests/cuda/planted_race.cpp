// Planted bug for ThreadSanitizer: a kernel that reads a neighbour's shared-memory slot
// without __syncthreads. CTest expects "ThreadSanitizer: data race" in the output (built
// only with EMBER_SANITIZE=thread).
#include <cstdio>
#include <vector>

#include "device_buffer.h"
#include "sample_kernels.h"

int main() {
  std::vector<float> x(512);
  for (int i = 0; i < 512; ++i) x[i] = float(i);
  ember::testing::DeviceBuffer<float> dx(x), dy(512);
  ember::test_kernels::rotate_without_barrier(dx.get(), dy.get(), 2);
  std::printf("planted race kernel ran; y[0] = %g\n", double(dy.download()[0]));
  return 0;
}
