// <cooperative_groups.h> for .cu files compiled by ember-simcc: the simulator's cooperative groups.
#pragma once
#include "cuda/sim/dropin.h"
#include "cuda/sim/cooperative_groups.h"
