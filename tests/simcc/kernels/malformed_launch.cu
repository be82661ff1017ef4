// Not CUDA: a launch whose configuration is never closed. ember-simcc must refuse it naming
// this file and line 7 (the CTest test "test_simcc: malformed_launch" expects that message).
__global__ void k(int* p) { *p = 1; }

int main() {
  int* p = nullptr;
  k<<<1, 1(p);
  return 0;
}
