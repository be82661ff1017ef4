// PyTorch reference values for the nn-op tests, read from tests/data/nn_fixtures.safetensors
// (written by tests/data/make_nn_fixtures.py), and a tolerance check that names the worst element.
//
//   Tensor x = nn_fixture("bn2d.x");                   // f64 (or i64) as stored
//   require_close(batch_norm(...), nn_fixture("bn2d.train.y"), 1e-10);
#pragma once

#include <string>

#include "ember.h"

namespace ember::test {

Tensor nn_fixture(const std::string& name);
double nn_fixture_scalar(const std::string& name);

// Same shape, and |got - expected| <= tol * (1 + |expected|) everywhere (compared in f64).
void require_close(const Tensor& got, const Tensor& expected, double tol);

}  // namespace ember::test
