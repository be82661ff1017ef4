// <device_launch_parameters.h> for .cu files compiled by ember-simcc: the SIMT simulator's CUDA (cuda/sim/dropin.h).
#pragma once
#include "cuda/sim/dropin.h"
