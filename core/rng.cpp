#include "core/rng.h"

#include "core/philox.h"

namespace ember {

std::array<uint32_t, 4> Philox4x32::block(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  const PhiloxWords w = philox4x32({{c[0], c[1], c[2], c[3]}}, {{k[0], k[1]}});
  return {w.v[0], w.v[1], w.v[2], w.v[3]};
}

std::array<uint32_t, 4> Generator::block(uint64_t index) const {
  const PhiloxWords w = philox_block(seed_, index);
  return {w.v[0], w.v[1], w.v[2], w.v[3]};
}

Generator& default_generator() {
  static thread_local Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

}  // namespace ember
