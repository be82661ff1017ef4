// bf16 and f16 elements as raw 16-bit patterns for the tensor-core tests, decoded with nothing
// but ldexp (independent of the converters under test) and drawn at random.
//
//   std::mt19937 gen(1);
//   uint16_t x = random_element(true, gen, 6);   // a bf16 in +-[2^-6, 2^7)
//   double v = decode_element(true, x);
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace ember::testing {

inline double decode_element(bool bf16, uint16_t bits) {
  const int exp_bits = bf16 ? 8 : 5, man_bits = 15 - exp_bits, bias = (1 << (exp_bits - 1)) - 1;
  const int exp = (bits >> man_bits) & ((1 << exp_bits) - 1), man = bits & ((1 << man_bits) - 1);
  double v = 0.0;
  if (exp == (1 << exp_bits) - 1) v = man ? std::nan("") : INFINITY;
  else if (exp == 0) v = std::ldexp(double(man), 1 - bias - man_bits);  // subnormal
  else v = std::ldexp(double(man + (1 << man_bits)), exp - bias - man_bits);
  return (bits >> 15) ? -v : v;
}

// A finite normal element with a random sign and mantissa and an exponent in [-e_range, e_range].
inline uint16_t random_element(bool bf16, std::mt19937& gen, int e_range) {
  const int man_bits = bf16 ? 7 : 10, bias = bf16 ? 127 : 15;
  const int exp = bias + int(gen() % uint32_t(2 * e_range + 1)) - e_range;
  return uint16_t(((gen() & 1u) << 15) | (uint32_t(exp) << man_bits) | (gen() & ((1u << man_bits) - 1)));
}

}  // namespace ember::testing
