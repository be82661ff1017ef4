// <cooperative_groups/reduce.h> for .cu files compiled by ember-simcc (cg::reduce is in the main header).
#pragma once
#include "cuda/sim/cooperative_groups.h"
