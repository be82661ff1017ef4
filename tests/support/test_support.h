// Helpers for ember's tests.
#pragma once
#include <catch2/catch.hpp>
