// Every loss (users include ember.h).
#pragma once

#include "losses/batch_hard_miner.h"
#include "losses/contrastive.h"
#include "losses/cross_entropy.h"
#include "losses/metric_common.h"
#include "losses/ntxent.h"
#include "losses/reduction.h"
#include "losses/triplet.h"
