// Every loss (users include ember.h).
#pragma once

#include "losses/cross_entropy.h"
#include "losses/reduction.h"
