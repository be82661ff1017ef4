// Planted bug for AddressSanitizer: a kernel whose bounds check lets one thread write one past
// the end of a device buffer. CTest expects "AddressSanitizer" in the output (built only with
// EMBER_SANITIZE=address).
#include <cstdio>

#include "device_buffer.h"
#include "sample_kernels.h"

int main() {
  ember::testing::DeviceBuffer<float> y(100);
  ember::test_kernels::write_one_past_end(y.get(), 100);
  std::printf("planted overflow kernel ran without a report\n");
  return 0;
}
