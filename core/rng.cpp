#include "core/rng.h"

namespace ember {

std::array<uint32_t, 4> Philox4x32::block(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c[0], p1 = uint64_t(kMul1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

std::array<uint32_t, 4> Generator::block(uint64_t index) const {
  return Philox4x32::block({uint32_t(index), uint32_t(index >> 32), 0, 0},
                           {uint32_t(seed_), uint32_t(seed_ >> 32)});
}

Generator& default_generator() {
  static thread_local Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

}  // namespace ember
