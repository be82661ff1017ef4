// Counter-based random numbers (Philox 4x32-10): element i of a draw depends only on
// (seed, offset, i), so the CPU and CUDA produce the same numbers for the same seed and any
// thread can compute any element.
//
//   manual_seed(42);
//   Tensor x = randn({2, 3});               // advances the default generator's offset
//   Generator g(7); Tensor y = rand({5}, {}, &g);
#pragma once

#include <array>
#include <cstdint>

#include "core/philox.h"  // also uniform_float, uniform_double

namespace ember {

// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
struct Philox4x32 {
  static std::array<uint32_t, 4> block(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
};

// A seed and a counter offset. Each draw of n values reserves `words` 32-bit words per value
// and advances the offset by the number of 4-word Philox blocks it used.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  // Reserves `blocks` Philox blocks; returns the first block index of the reservation.
  uint64_t reserve(uint64_t blocks) { const uint64_t o = offset_; offset_ += blocks; return o; }

  // Word w (0..3) of Philox block `index` for this seed.
  std::array<uint32_t, 4> block(uint64_t index) const;

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);  // sets the default generator's seed and resets its offset

}  // namespace ember
