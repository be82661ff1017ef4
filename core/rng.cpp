#include "core/rng.h"

namespace ember {

std::array<uint32_t, 4> Philox4x32::block(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  philox4x32_10(c.data(), k[0], k[1]);
  return c;
}

std::array<uint32_t, 4> Generator::block(uint64_t index) const {
  std::array<uint32_t, 4> w;
  philox_block(seed_, index, w.data());
  return w;
}

Generator& default_generator() {
  static thread_local Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

}  // namespace ember
